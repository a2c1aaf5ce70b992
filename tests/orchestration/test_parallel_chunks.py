"""One audit's chunks side by side: free slots filled, one finalize, a shared politeness budget, true depths."""

from __future__ import annotations

import math
import random
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from audits import depths
from audits.crawl.progress import advance
from audits.crawl.start import run_start
from audits.dispatch import Dispatcher
from audits.models import Audit, ChunkLease, FrontierURL, LinkEdge, Page
from audits.services import create_audit
from tests.conftest import wait_for
from tests.factories import make_audit

from .grid_site import GridSite
from .outcomes import parsed_page


class Recorder(Dispatcher):
    """The cluster's dispatcher, recording steps instead of enqueueing them."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.steps: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def chunks_per_audit(self) -> int:
        return self.slots

    def chunk(self, audit_id, number, queue=None):
        with self.lock:
            self.steps.append(("chunk", number))

    def finalize(self, audit_id):
        with self.lock:
            self.steps.append(("finalize", 0))

    def wait(self, audit_id, after, seconds):
        with self.lock:
            self.steps.append(("wait", after))


def crawling(owner, **fields) -> Audit:
    audit = make_audit(owner, start_url="http://127.0.0.1:9/", allow_private=True, **fields)
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.RUNNING, phase=Audit.Phase.CRAWLING,
                                             origin="http://127.0.0.1:9")
    audit.refresh_from_db()
    return audit


def leased(audit: Audit, number: int) -> ChunkLease:
    ChunkLease.objects.create(audit=audit, number=number)
    return ChunkLease.objects.claim(audit.pk, number, seconds=60, max_attempts=3)


@pytest.mark.django_db
def test_a_start_fills_the_free_chunk_slots_but_never_more_than_the_pending_urls_need(owner, fast_settings):
    with GridSite(pages=40) as site:
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, concurrency=8)
        roomy = Recorder(slots=4)
        run_start(audit.pk, roomy)
    # The start page queued two pages: with ten URLs a chunk, one chunk is enough.
    assert roomy.steps == [("chunk", 1)]
    for i in range(100):
        FrontierURL.objects.create(audit=audit, url=f"{site.url('/more')}/{i}", url_hash=f"{i:032x}", depth=2)
    audit.refresh_from_db()
    advance(audit, 1, roomy)
    assert roomy.steps == [("chunk", 1), ("chunk", 2), ("chunk", 3), ("chunk", 4)]
    assert ChunkLease.objects.open_for(audit.pk).count() == 4
    assert Audit.objects.get(pk=audit.pk).out_of_order  # its depths get settled at finalize


@pytest.mark.django_db
def test_an_audit_never_gets_more_chunks_than_requests_it_may_have_in_flight(owner, fast_settings):
    audit = crawling(owner, concurrency=2)
    for i in range(100):
        FrontierURL.objects.create(audit=audit, url=f"http://127.0.0.1:9/{i}", url_hash=f"{i:032x}", depth=1)
    dispatcher = Recorder(slots=4)
    advance(audit, 0, dispatcher)
    assert dispatcher.steps == [("chunk", 1), ("chunk", 2)]


@pytest.mark.django_db
def test_only_the_last_chunk_to_end_finalizes(owner, fast_settings):
    audit = crawling(owner)
    first, second = leased(audit, 1), leased(audit, 2)
    dispatcher = Recorder(slots=4)
    first.finish()
    advance(audit, 1, dispatcher)
    assert dispatcher.steps == []  # chunk 2 still runs: it decides
    second.finish()
    advance(audit, 2, dispatcher)
    assert dispatcher.steps == [("finalize", 0)]


@pytest.mark.django_db(transaction=True)
def test_two_chunks_ending_at_the_same_moment_finalize_the_audit_exactly_once(owner, fast_settings):
    audit = crawling(owner)
    leases = [leased(audit, 1), leased(audit, 2)]
    dispatcher = Recorder(slots=4)
    both_finished = threading.Barrier(2, timeout=10)
    # PostgreSQL: each closes its own lease and waits for the other before either
    # commits. SQLite has one writer at a time, so there they set off together and
    # the second transaction waits for the first to commit.
    inside = connection.vendor != "sqlite"
    errors = []

    def end(lease: ChunkLease) -> None:
        try:
            if not inside:
                both_finished.wait()
            with transaction.atomic():
                lease.finish()
                if inside:
                    both_finished.wait()
                advance(Audit.objects.get(pk=audit.pk), lease.number, dispatcher)
        except Exception as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=end, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert dispatcher.steps == [("finalize", 0)]
    assert Audit.objects.get(pk=audit.pk).status == Audit.Status.FINALIZING


@pytest.mark.django_db
def test_chunks_sharing_an_audit_never_have_more_in_flight_than_its_concurrency(owner, fast_settings):
    cap = 12
    audit = crawling(owner, concurrency=cap)
    leases = [leased(audit, n) for n in range(1, 5)]
    limits = {lease.pk: 0 for lease in leases}
    in_flight = {lease.pk: 0 for lease in leases}
    randomly = random.Random(7)
    for _ in range(400):
        lease = randomly.choice(leases)
        limit, parts = lease.rebalance(cap, in_flight[lease.pk])
        assert parts == 4 and limit <= cap // 4
        limits[lease.pk] = limit
        # Until its next rebalance a chunk's requests end at will, and it starts
        # new ones only while it has fewer than its limit in flight.
        in_flight[lease.pk] = randomly.randint(0, in_flight[lease.pk])
        in_flight[lease.pk] = randomly.randint(in_flight[lease.pk], max(limit, in_flight[lease.pk]))
        assert sum(in_flight.values()) <= cap, (in_flight, limits)
    # Settled, every chunk gets its fair part.
    for _ in range(3):
        for lease in leases:
            in_flight[lease.pk] = 0
            limits[lease.pk] = lease.rebalance(cap, 0)[0]
    assert sorted(limits.values()) == [3, 3, 3, 3]


@pytest.mark.django_db
def test_a_chunk_alone_gets_the_whole_budget_and_a_lost_lease_gets_none(owner, fast_settings):
    audit = crawling(owner, concurrency=8)
    lease = leased(audit, 1)
    assert lease.rebalance(8, 0) == (8, 1)
    expired = leased(audit, 2)
    ChunkLease.objects.filter(pk=expired.pk).update(leased_until=timezone.now() - timedelta(seconds=1), share=8)
    assert lease.rebalance(8, 0) == (8, 1)  # a dead worker's share is not held against the living
    ChunkLease.objects.filter(pk=lease.pk).update(token=None)
    assert lease.rebalance(8, 0) is None


@pytest.mark.django_db
def test_finalize_settles_depths_written_out_of_click_order(owner, fast_settings):
    # / -> a -> b -> c, and a shortcut / -> c that a chunk wrote after c and b were crawled.
    audit = crawling(owner)
    Audit.objects.filter(pk=audit.pk).update(out_of_order=True)
    audit.refresh_from_db()
    origin = "http://127.0.0.1:9"
    recorded = {"/": 0, "/a": 1, "/b": 2, "/c": 3, "/d": 4, "/img.png": 5}
    for path, depth in recorded.items():
        kind = Page.Kind.RESOURCE if path.endswith(".png") else Page.Kind.PAGE
        Page.objects.create(audit=audit, url=origin + path, url_hash=f"h{path}", depth=depth, kind=kind)
        FrontierURL.objects.create(audit=audit, url=origin + path, url_hash=f"h{path}", depth=depth, linked=True,
                                   kind=kind, state=FrontierURL.State.DONE)
    for source, target, tag in [("/", "/a", "a"), ("/a", "/b", "a"), ("/b", "/c", "a"), ("/", "/c", "a"),
                                ("/c", "/d", "a"), ("/d", "/img.png", "img")]:
        LinkEdge.objects.create(audit=audit, source_hash=f"h{source}", source_url=origin + source,
                                target_hash=f"h{target}", target_url=origin + target, tag=tag, internal=True)
    assert depths.settle(audit) >= 2
    settled = dict(Page.objects.filter(audit=audit).values_list("url", "depth"))
    assert settled == {origin + "/": 0, origin + "/a": 1, origin + "/b": 2, origin + "/c": 1, origin + "/d": 2,
                       origin + "/img.png": 3}


@pytest.mark.django_db
def test_a_shorter_path_written_later_lowers_a_queued_and_a_crawled_pages_depth(chunk_writer):
    writer, items = chunk_writer
    origin = writer.audit.origin
    deep, crawled = f"{origin}/found-late", f"{origin}/crawled-early"
    writer.write([parsed_page(f"{origin}/p/30", (deep, "deep"), (crawled, "deep"), depth=4)])
    assert FrontierURL.objects.get(audit=writer.audit, url=deep).depth == 5
    Page.objects.create(audit=writer.audit, url=crawled, url_hash=FrontierURL.objects.get(
        audit=writer.audit, url=crawled).url_hash, depth=5)
    writer.write([parsed_page(f"{origin}/p/2", (deep, "shallow"), (crawled, "shallow"), depth=1)])
    assert FrontierURL.objects.get(audit=writer.audit, url=deep).depth == 2
    assert Page.objects.get(audit=writer.audit, url=crawled).depth == 2


# Four chunks at once, ten URLs each; a site slow enough that they overlap.
PARALLEL = {"SITEWARD_CHUNKS_PER_AUDIT": 4, "SITEWARD_CHUNK_SIZE": 10, "Q_WORKERS": 2, "SITEWARD_CHUNK_SECONDS": 20,
            "Q_TIMEOUT": 60, "Q_RETRY": 90, "SITEWARD_LEASE_SECONDS": 6}


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_two_clusters_crawl_one_audit_in_parallel_chunks_within_its_concurrency(owner, cluster_factory):
    concurrency = 4
    # 120 pages: six levels, the deepest the trap rules let one path template reach.
    with GridSite(pages=120, delay=0.05) as site:
        clusters = [cluster_factory(**PARALLEL).start(), cluster_factory(**PARALLEL).start()]
        audit = create_audit(owner, enforce_quota=False, start_url=site.url("/"), allow_private=True,
                             concurrency=concurrency, max_pages=1000, check_external=False)
        wait_for(lambda: Audit.objects.get(pk=audit.pk).status in Audit.ENDED, 150, interval=0.5,
                 message=lambda: "the audit to end:\n" + "\n".join(c.log() for c in clusters))
        peak = site.peak
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert peak <= concurrency, f"{peak} requests at once against a concurrency of {concurrency}"
    chunks = list(ChunkLease.objects.filter(audit=audit, number__gt=0, started_at__isnull=False))
    assert len({chunk.cluster for chunk in chunks}) == 2, "both clusters crawled"
    overlapping = any(a.started_at < b.finished_at and b.started_at < a.finished_at
                      for a in chunks for b in chunks if a.number < b.number)
    assert overlapping, "chunks of the audit ran at the same time"
    pages = dict(Page.objects.filter(audit=audit, kind=Page.Kind.PAGE).values_list("url", "depth"))
    expected = {site.url(path) for path in site.page_paths()}
    assert set(pages) == expected, (sorted(set(pages) - expected), sorted(expected - set(pages)))
    assert all(site.hits(path) == 1 for path in site.page_paths())  # every URL crawled by one chunk only
    for i in range(1, site.pages + 1):  # page i of the binary tree is floor(log2(i)) clicks deep
        assert pages[site.url(site.path(i))] == int(math.log2(i)), site.path(i)


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_chunks_side_by_side_never_crawl_past_max_pages(owner, cluster_factory):
    with GridSite(pages=120, delay=0.02) as site:
        clusters = [cluster_factory(**PARALLEL).start(), cluster_factory(**PARALLEL).start()]
        audit = create_audit(owner, enforce_quota=False, start_url=site.url("/"), allow_private=True,
                             concurrency=8, max_pages=45, check_external=False)
        wait_for(lambda: Audit.objects.get(pk=audit.pk).status in Audit.ENDED, 150, interval=0.5,
                 message=lambda: "the audit to end:\n" + "\n".join(c.log() for c in clusters))
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert Page.objects.filter(audit=audit, kind=Page.Kind.PAGE).count() == 45
    assert ChunkLease.objects.filter(audit=audit, number__gt=1).exists()


@pytest.mark.django_db
def test_pages_found_past_the_page_limit_start_no_chunk_that_would_lease_nothing(owner, fast_settings):
    """The last chunks of a capped crawl keep finding links; each sub-batch scheduled up to three empty chunks."""
    from audits.crawl.progress import fill_slots

    audit = crawling(owner, max_pages=5, concurrency=8)
    leased(audit, 1)
    for i in range(5):  # the budget, spent: fetched pages
        FrontierURL.objects.create(audit=audit, url=f"http://127.0.0.1:9/p{i}", url_hash=f"{i:032x}", depth=1,
                                   state=FrontierURL.State.DONE, linked=True)
    for i in range(5, 60):  # found since, past max_pages
        FrontierURL.objects.create(audit=audit, url=f"http://127.0.0.1:9/p{i}", url_hash=f"{i:032x}", depth=2,
                                   linked=True)
    Audit.objects.filter(pk=audit.pk).update(pages_discovered=60)
    audit.refresh_from_db()
    recorder = Recorder(slots=4)
    with transaction.atomic():
        assert fill_slots(audit, recorder) == 0
    assert recorder.steps == [] and ChunkLease.objects.filter(audit=audit).count() == 1

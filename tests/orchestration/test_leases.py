"""The lease protocol: claims counted at claim time, fenced writes, retries that keep their URLs."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audits.crawl import admission
from audits.crawl.chunk import claim, lease_items, run_chunk
from audits.crawl.resume import run_resume
from audits.crawl.setup import crawl_setup
from audits.crawl.writer import ChunkWriter, LeaseLost
from audits.dispatch import InlineDispatcher
from audits.inline import run_steps
from audits.models import Audit, ChunkLease, FrontierURL, Page
from audits.services import cancel_audit
from crawler.page import PageOutcome
from crawler.types import FetchResult

from .grid_site import GridSite
from .starting import started

pytestmark = pytest.mark.django_db


def expire(lease_number: int, audit: Audit) -> None:
    ChunkLease.objects.filter(audit=audit, number=lease_number).update(
        leased_until=timezone.now() - timedelta(seconds=1))


def test_a_finished_chunk_refuses_a_new_claim(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site)
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    assert claim(audit.pk, 1) is None
    assert run_chunk(audit.pk, 1, dispatcher) == "refused"
    assert grid_site.hits("/") == 1 and grid_site.hits("/p/2") == 1


def test_a_live_lease_refuses_a_duplicate_delivery(owner, grid_site, fast_settings):
    audit, _ = started(owner, grid_site)
    first = claim(audit.pk, 1)
    assert first is not None and first.attempts == 1
    assert claim(audit.pk, 1) is None


def test_an_expired_lease_is_reclaimed_counting_the_attempt_and_keeping_its_urls(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site)
    assert run_chunk(audit.pk, 1, dispatcher) == "done"  # the start page; chunk 2 gets its links
    first = claim(audit.pk, 2)
    held = [item.url for item in lease_items(audit, first)]
    assert held
    expire(2, audit)
    second = claim(audit.pk, 2)
    assert second.attempts == 2 and second.token != first.token
    assert second.attempts > 1  # a retry after a death: run_chunk runs it one URL at a time
    assert [item.url for item in lease_items(audit, second)] == held


def test_a_zombie_whose_lease_was_reclaimed_writes_nothing(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site)
    zombie = claim(audit.pk, 1)
    items = lease_items(audit, zombie)
    expire(1, audit)
    assert claim(audit.pk, 1) is not None  # B takes over
    writer = ChunkWriter(audit, zombie, crawl_setup(audit))
    outcome = PageOutcome(items[0].url, 0, FetchResult(items[0].url, items[0].url, status=200), None, (), ())
    with pytest.raises(LeaseLost):
        writer.write([outcome])
    assert not Page.objects.filter(audit=audit, url=items[0].url).exists()


def test_a_chunk_out_of_attempts_records_its_urls_as_lost_and_the_crawl_goes_on(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site)
    run_chunk(audit.pk, 1, dispatcher)
    dispatcher.steps.clear()
    for _ in range(3):  # three workers die holding chunk 2
        held = claim(audit.pk, 2)
        lease_items(audit, held)
        expire(2, audit)
    held = set(FrontierURL.objects.filter(audit=audit, chunk=2).values_list("url", flat=True))
    assert run_chunk(audit.pk, 2, dispatcher) == "abandoned"
    lost = Page.objects.filter(audit=audit, fetch_error="worker_lost")
    assert set(lost.values_list("url", flat=True)) == held
    assert dispatcher.steps  # the crawl goes on (here: nothing left, so finalize)
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED


def serial_retry(owner, grid_site) -> tuple[Audit, InlineDispatcher, ChunkLease, list]:
    """Chunk 2's second attempt (the first died), which runs serially: the audit, its dispatcher, the lease, its URLs."""
    audit, dispatcher = started(owner, grid_site)
    run_chunk(audit.pk, 1, dispatcher)
    dispatcher.steps.clear()
    claim(audit.pk, 2)  # attempt 1 dies
    expire(2, audit)
    lease = claim(audit.pk, 2)
    return audit, dispatcher, lease, lease_items(audit, lease)


def test_the_url_that_kills_its_worker_is_isolated_on_retry(owner, grid_site, fast_settings):
    audit, dispatcher, first, items = serial_retry(owner, grid_site)
    poison = items[-1]
    # Attempt 2 ran serially: it marked the poison URL and died fetching it.
    writer = ChunkWriter(audit, first, crawl_setup(audit))
    writer.mark_try(poison)
    expire(2, audit)
    assert run_chunk(audit.pk, 2, dispatcher) == "done"  # attempt 3
    page = Page.objects.get(audit=audit, url=poison.url)
    assert page.fetch_error == "worker_lost"
    others = Page.objects.filter(audit=audit, url__in=[i.url for i in items[:-1]])
    assert others.count() == len(items) - 1 and not others.exclude(fetch_error="").exists()
    assert grid_site.hits(poison.url.removeprefix(grid_site.url("").rstrip("/"))) == 0


def test_cancel_mid_chunk_stops_within_a_batch_and_resume_finishes_the_crawl(
        owner, grid_site, fast_settings, monkeypatch):
    audit, dispatcher = started(owner, grid_site, max_pages=100)
    run_chunk(audit.pk, 1, dispatcher)
    dispatcher.steps.clear()
    cancelled = []
    admit = admission.admit

    def cancel_during_first_batch(*args):
        # The dashboard's cancel lands while the chunk's first sub-batch is being written.
        if not cancelled:
            cancelled.append(cancel_audit(Audit.objects.get(pk=audit.pk)))
        return admit(*args)

    monkeypatch.setattr(admission, "admit", cancel_during_first_batch)
    assert run_chunk(audit.pk, 2, dispatcher) == "stopped"
    audit.refresh_from_db()
    assert audit.status == Audit.Status.CANCELLED and audit.error_code == "cancelled"
    kept = audit.pages.count()
    assert kept >= 2  # what was crawled before the cancel stays
    assert not FrontierURL.objects.filter(audit=audit, state="leased").exists()
    assert dispatcher.steps == []

    assert audit.reopen_for_resume()
    run_resume(audit.pk, dispatcher)
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    stored = set(audit.pages.values_list("url", flat=True))
    assert {grid_site.url(p) for p in grid_site.page_paths()} <= stored
    for path in grid_site.page_paths():  # nothing fetched twice across the cancel and resume
        assert grid_site.hits(path) == 1, path


@pytest.mark.django_db(transaction=True)
def test_two_executions_of_one_chunk_at_once_fetch_and_store_each_url_once(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site)
    results, barrier = [], threading.Barrier(2)

    def execute():
        try:
            barrier.wait()
            results.append(run_chunk(audit.pk, 1, InlineDispatcher()))
        finally:
            connection.close()

    threads = [threading.Thread(target=execute) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(results) == ["done", "refused"]
    assert (grid_site.hits("/p/2"), grid_site.hits("/p/3")) == (1, 1)
    assert Page.objects.filter(audit=audit).count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_chunk_waiting_on_a_slow_page_keeps_its_lease_by_heartbeat(owner, fast_settings):
    # Each page takes longer to answer than the whole lease: only the heartbeat,
    # sent while nothing is written, keeps a watchdog from reclaiming the chunk.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "LEASE_SECONDS": 1.5}
    with GridSite(pages=3, delay=2.0) as site:
        audit, dispatcher = started(owner, site)
        watching = threading.Event()
        expired_seen = []

        def watchdog_eye():
            while not watching.is_set():
                expired_seen.extend(ChunkLease.objects.filter(
                    audit=audit, state=ChunkLease.State.LEASED, leased_until__lt=timezone.now()))
                watching.wait(0.1)
            connection.close()

        eye = threading.Thread(target=watchdog_eye)
        eye.start()
        try:
            assert run_chunk(audit.pk, 1, dispatcher) == "done"
        finally:
            watching.set()
            eye.join()
    assert expired_seen == []
    assert ChunkLease.objects.get(audit=audit, number=1).attempts == 1


def test_a_url_handed_back_by_a_stopping_retry_is_not_taken_later_for_the_one_that_killed_its_worker(
        owner, grid_site, fast_settings):
    audit, dispatcher, retry, items = serial_retry(owner, grid_site)
    fetching = items[0]
    ChunkWriter(audit, retry, crawl_setup(audit)).mark_try(fetching)
    retry.release()  # the cluster is stopping: the chunk hands its URLs back
    assert FrontierURL.objects.get(id=fetching.id).tries == 0
    expire(2, audit)
    assert run_chunk(audit.pk, 2, dispatcher) == "done"  # attempt 3, serial again
    assert Page.objects.get(audit=audit, url=fetching.url).fetch_error == ""


def test_a_finished_chunk_gives_back_every_url_it_still_holds_even_one_a_late_top_up_leased(
        owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site)
    assert run_chunk(audit.pk, 1, dispatcher) == "done"  # the start page; its links are pending now
    lease = claim(audit.pk, 2)
    held = lease_items(audit, lease)  # as a top-up answered after the window had stopped asking
    assert held
    assert lease.finish()
    assert not FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.LEASED).exists()
    assert set(FrontierURL.objects.filter(id__in=[item.id for item in held]).values_list("state", flat=True)) == {
        FrontierURL.State.PENDING}

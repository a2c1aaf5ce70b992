"""A Retry-After pauses the audited site for the audit, not for one chunk: the pause is stored on
the audit's row, no chunk is scheduled before it ends (the audit waits, in the `audit` command's loop
or for the watchdog, as for a rate-limited URL), and a chunk that runs meanwhile (one beside the chunk
the site answered, or one taken from the queue late) starts nothing on the site before it ends.

The sites are loopback servers that record the requests they get; one throttles after a page (429,
Retry-After: 3, to every request for the next three seconds). The in-task Retry-After cap is lowered
to half a second there, so a three-second wait is the window's pause, as a longer one is in
production, and the test stays short; the longer pauses elsewhere pass on the database clock
(``DatabaseTimePasses``), with no real wait.
"""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from audits.crawl.chunk import run_chunk, site_pause
from audits.crawl.setup import MAX_RESCHEDULES
from audits.crawl.start import run_start
from audits.dispatch import RETRY_AFTER_RESCHEDULE_CAP, Dispatcher, InlineDispatcher
from audits.inline import run_steps
from audits.models import Audit, ChunkLease, FrontierURL, Page
from audits.watchdog import queued_task_names, run_watchdog
from tests.crawler.hostile_server import Arrivals, HostileServer, Throttle, static
from tests.factories import make_audit
from tests.orchestration.test_rate_limit_reschedule import (
    PLAIN,
    DatabaseTimePasses,
    page,
    serve,
    started,
    stored,
)

PAGES = [f"/p{n}" for n in range(6)]


@pytest.fixture
def site():
    with HostileServer() as server:
        yield server


@pytest.fixture
def short_in_task_wait(monkeypatch):
    monkeypatch.setattr("audits.crawl.setup.RETRY_AFTER_IN_TASK", 0.5)


def throttled_site(server: HostileServer, allow: int, wait: int) -> Throttle:
    throttle = Throttle(allow=allow, wait=wait, body=page())
    server.route("/", static(page(*PAGES)))
    for path in PAGES:
        server.route(path, throttle)
    return throttle


@pytest.mark.django_db
def test_the_next_chunk_waits_out_the_retry_after_the_last_chunk_was_given(
        owner, site, fast_settings, short_in_task_wait):
    # The site's three-second pause outlasts chunk 1's soft deadline (2 s): chunk 1 hands its pages back
    # as it reads the pause, and the next chunk is scheduled once the pause is over, not before.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SOFT_DEADLINE": 2.0}
    throttle = throttled_site(site, allow=1, wait=3)
    audit, dispatcher, _ = started(owner, site, concurrency=1, check_external=False)
    began = time.monotonic()
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    assert time.monotonic() - began < 1.5  # at once, not at its deadline
    assert throttle.paused_at is not None and len(throttle.arrivals) == 2  # a page, then the 429
    assert dispatcher.steps[-1] == ("wait", audit.pk, 1) and 2.0 < dispatcher.pauses[(audit.pk, 2)] <= 3.0
    assert not ChunkLease.objects.filter(audit=audit, number=2).exists()
    dispatcher.sleep = time.sleep  # the site's clock is the real one
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    # Chunk 2 sent nothing while the site's pause ran, and crawled the pages after it.
    assert throttle.during_pause() == [throttle.paused_at]
    assert len(throttle.arrivals) > 2 and throttle.arrivals[2] >= throttle.paused_at + throttle.wait
    done = Page.objects.filter(audit=audit, url__in=[site.url(path) for path in PAGES])
    assert sorted(done.values_list("status_code", flat=True)) == [200] * len(PAGES)
    assert ChunkLease.objects.filter(audit=audit, number__gt=0).count() == 2  # no chunk sat in the pause


def slow_first(server: HostileServer, *answers: str) -> None:
    """"/" links to /slow (429 with each Retry-After in ``answers``, then the page) before three plain pages:
    one request at a time, those are still to come when the site asks to be left alone."""
    serve(server, {"/slow": answers}, plain=())
    server.route("/", static(page("/slow", *PLAIN)))
    for path in PLAIN:
        server.route(path, static(page()))


@pytest.mark.django_db
def test_a_long_pause_holds_no_worker_while_pages_wait_and_one_chunk_crawls_them_after_it(
        owner, site, fast_settings):
    # Five minutes: no chunk runs in them, where before each sat idle until its soft deadline,
    # sending nothing, and scheduled the next to do the same.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SOFT_DEADLINE": 3.0}
    slow_first(site, "300")
    audit, dispatcher, clock = started(owner, site, concurrency=1, check_external=False)
    began = time.monotonic()
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    assert time.monotonic() - began < 2.0
    assert site.requests["/slow"] == 1 and all(site.requests[path] == 0 for path in PLAIN)
    assert dispatcher.steps[-1] == ("wait", audit.pk, 1) and 295 < dispatcher.pauses[(audit.pk, 2)] <= 300
    assert not ChunkLease.objects.filter(audit=audit, number=2).exists()
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert 295 < sum(clock.calls) <= 300  # one wait, in the loop's slices
    assert ChunkLease.objects.filter(audit=audit, number__gt=0).count() == 2  # no chunk sat in the pause
    assert site.requests["/slow"] == 2 and all(site.requests[path] == 1 for path in PLAIN)
    assert all(stored(audit, site, path).status_code == 200 for path in ("/slow", *PLAIN))


@pytest.mark.django_db
def test_a_chunk_that_starts_inside_a_pause_outlasting_its_deadline_hands_its_urls_back_at_once(
        owner, site, fast_settings):
    # A chunk queued before the pause was stored, taken by a worker after: it sends nothing and holds nothing.
    throttle = throttled_site(site, allow=100, wait=2)
    audit, dispatcher, _ = started(owner, site, concurrency=1, check_external=False)
    audit.pause_site(30)
    began = time.monotonic()
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    assert time.monotonic() - began < 2.0 and throttle.arrivals == []
    assert not FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.LEASED).exists()
    assert dispatcher.steps[-1] == ("wait", audit.pk, 1) and 25 < dispatcher.pauses[(audit.pk, 2)] <= 30


@pytest.mark.django_db(transaction=True)
def test_the_watchdog_counts_a_site_pause_as_a_wait_and_starts_the_next_chunk_as_it_ends(
        owner, site, fast_settings):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "STALL_SECONDS": 60}
    slow_first(site, "300")
    audit, _, _ = started(owner, site, concurrency=1, check_external=False)
    # /slow is on its last reschedule: the 429 stores it rate_limited, and no URL is left waiting for a
    # Retry-After of its own; the site's pause is all that holds the pages still to come.
    FrontierURL.objects.filter(audit=audit, url=site.url("/slow")).update(reschedules=MAX_RESCHEDULES)
    OrmQ.objects.all().delete()
    # The worker's dispatcher cannot enqueue a task for later: chunk 1 schedules nothing.
    assert run_chunk(audit.pk, 1, Dispatcher()) == "done"
    assert stored(audit, site, "/slow").fetch_error == "rate_limited"
    assert not ChunkLease.objects.filter(audit=audit, number=2).exists() and not OrmQ.objects.exists()
    # Quiet for longer than the stall limit, but waiting as the site asked: not stalled, and no chunk yet.
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=61))
    assert run_watchdog() == "nothing to do"
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING and not OrmQ.objects.exists()
    # The pause ends: the next chunk starts at the next pass, with no grace (nothing else would start it).
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=1.5),
                                             site_paused_until=timezone.now() - timedelta(seconds=1))
    assert run_watchdog() == f"advanced {audit.pk} after chunk 1"
    assert queued_task_names() == {f"audit-{audit.pk}-chunk-2"}
    assert run_chunk(audit.pk, 2, Dispatcher()) == "done"
    assert all(stored(audit, site, path).status_code == 200 for path in PLAIN)


@pytest.mark.django_db(transaction=True)
def test_the_watchdog_starts_no_chunk_in_a_site_pause_while_pages_are_due(owner, site, fast_settings):
    slow_first(site, "300")
    audit, _, _ = started(owner, site, concurrency=1, check_external=False)
    OrmQ.objects.all().delete()
    assert run_chunk(audit.pk, 1, Dispatcher()) == "done"
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=10))
    assert run_watchdog() == "nothing to do"
    assert not ChunkLease.objects.filter(audit=audit, number=2).exists() and not OrmQ.objects.exists()


@pytest.mark.django_db
def test_a_chunk_started_after_the_pause_ended_does_not_wait(owner, site, fast_settings):
    throttle = throttled_site(site, allow=100, wait=2)
    audit, dispatcher, _ = started(owner, site, concurrency=1, check_external=False)
    Audit.objects.filter(pk=audit.pk).update(site_paused_until=timezone.now() - timedelta(seconds=30))
    began = time.monotonic()
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    assert len(throttle.arrivals) == len(PAGES) and throttle.arrivals[0] - began < 1.0


@pytest.mark.django_db
def test_the_stored_pause_only_grows_and_a_chunk_waits_no_longer_than_the_reschedule_cap(owner):
    audit = make_audit(owner)
    assert site_pause(audit) == 0.0
    audit.pause_site(20)
    audit.pause_site(5)  # a shorter answer later does not end the longer pause another chunk was given
    assert 19 < site_pause(audit) <= 20
    Audit.objects.filter(pk=audit.pk).update(site_paused_until=timezone.now() + timedelta(days=3))
    assert site_pause(audit) == RETRY_AFTER_RESCHEDULE_CAP


class SideBySide(InlineDispatcher):
    """The inline dispatcher, with room for chunks beside the one running: it shares the audit's budget
    with them, and rebalances (and rereads the site's pause) every SHARE_SECONDS, as on PostgreSQL."""

    def chunks_per_audit(self) -> int:
        return 2


@pytest.mark.django_db
def test_a_pause_a_chunk_beside_this_one_was_given_holds_this_ones_requests_too(owner, site, fast_settings):
    # This chunk's site answers it at once, but a chunk beside it, on another worker, was just told
    # Retry-After: 3 (stored as that chunk's write does, once this one's first sub-batch is in). This one
    # learns of it at its next rebalance, a second at most, and starts nothing on the site until it ends.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SIZE": 30, "CHUNK_SOFT_DEADLINE": 12.0}
    arrivals = Arrivals(delay=0.25)
    pages = [f"/q{n}" for n in range(16)]
    site.route("/", static(page(*pages)))
    for path in pages:
        site.route(path, arrivals)
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, concurrency=1, check_external=False)
    dispatcher = SideBySide()
    run_start(audit.pk, dispatcher)
    stored_at: list[float] = []

    def beside(outcomes, issues, kinds) -> None:
        if not stored_at:
            stored_at.append(time.monotonic())
            Audit.objects.get(pk=audit.pk).pause_site(3.0)

    assert run_chunk(audit.pk, 1, dispatcher, on_batch=beside) == "done"
    paused_at = stored_at[0]
    # A second to the next rebalance, and a little for a loaded machine.
    assert [t for t in arrivals.times if paused_at + 1.4 < t < paused_at + 3.0] == []
    assert [t for t in arrivals.times if t >= paused_at + 3.0]  # and it went on after the pause
    assert len(arrivals.times) == len(pages)


@pytest.mark.django_db
def test_the_audit_command_says_it_waits_out_the_sites_pause_while_pages_are_still_to_crawl(
        site, fast_settings, tmp_path, capsys, monkeypatch):
    from django.core.management import call_command

    from audits.management.commands.audit import Command

    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SOFT_DEADLINE": 2.0}
    slow_first(site, "8")
    clock = DatabaseTimePasses()
    monkeypatch.setattr(Command, "sleep", staticmethod(clock))
    out = tmp_path / "report.jsonl"
    call_command("audit", site.url("/"), "--allow-private", "--concurrency", "1", "--out", str(out))
    printed = capsys.readouterr().out
    # One wait, said once: the pages behind /slow wait for the site's pause, not for chunks to run empty.
    assert re.search(r"Waiting [78] s: the site asked us to come back later \(Retry-After\)", printed), printed
    assert printed.count("Waiting") == 1 and 7.0 < sum(clock.calls) <= 8.0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    statuses = {r["url"]: r["status"] for r in records if r["type"] == "page"}
    assert all(statuses[site.url(path)] == 200 for path in ("/", "/slow", *PLAIN))
    assert site.requests["/slow"] == 2 and all(site.requests[path] == 1 for path in PLAIN)

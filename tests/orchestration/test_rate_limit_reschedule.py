"""A URL answering 429/503 with a long Retry-After goes back to the frontier with a
not_before instead of holding its chunk (RELIABILITY #24): the rest of the chunk goes
on, the URL is fetched again once due and stored once, a wait past the cap gives it
up as rate_limited, and the watchdog treats an audit waiting on one as alive.

The sites are loopback servers; the inline dispatcher's sleep is injected and lets
database time pass for the waiting URLs (moves their not_before back), so no test
really waits for a Retry-After.
"""

from __future__ import annotations

import email.utils
import json
import time
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.db.models import F
from django.utils import timezone
from django_q.models import OrmQ

from audits.crawl.chunk import run_chunk
from audits.crawl.setup import MAX_RESCHEDULES
from audits.crawl.start import run_start
from audits.dispatch import Dispatcher, InlineDispatcher
from audits.inline import run_steps
from audits.models import Audit, ChunkLease, FrontierURL, Page
from audits.watchdog import queued_task_names, run_watchdog
from crawler.fetch import FetchPolicy
from crawler.page import PageOutcome
from crawler.types import FetchError, FetchResult
from tests.crawler.hostile_server import Arrivals, HostileServer, Throttle, respond, static
from tests.factories import make_audit

PLAIN = ("/a", "/b", "/c")


def page(*links: str) -> bytes:
    anchors = "".join(f'<a href="{href}">to {href}</a> ' for href in links)
    return (f"<!doctype html><html lang=en><head><title>A page of the throttled test site</title></head>"
            f"<body><h1>Throttled site</h1>{anchors}</body></html>").encode()


def throttled(*retry_afters):
    """429 with each Retry-After in turn (a callable gives the value when asked), then the page."""
    answers = list(retry_afters)

    async def handler(request, reader, writer, server) -> None:
        if not answers:
            await respond(request, writer, server, body=page())
            return
        value = answers.pop(0)
        value = value() if callable(value) else value
        await respond(request, writer, server, status=429, body=b"<html>slow down</html>",
                      headers={"Retry-After": value})

    return handler


def in_seconds(seconds: float):
    return lambda: email.utils.formatdate(time.time() + seconds, usegmt=True)


@pytest.fixture
def site():
    with HostileServer() as server:
        yield server


def serve(server: HostileServer, throttled_paths: dict[str, tuple], plain=PLAIN) -> None:
    """"/" links to the plain pages first, then to each throttled path."""
    server.route("/", static(page(*plain, *throttled_paths)))
    for path in plain:
        server.route(path, static(page()))
    for path, answers in throttled_paths.items():
        server.route(path, throttled(*answers))


class DatabaseTimePasses:
    """The inline dispatcher's sleep: records each wait and moves waiting URLs' not_before, and the end of
    the site's pause, back by it."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        FrontierURL.objects.filter(not_before__isnull=False).update(
            not_before=F("not_before") - timedelta(seconds=seconds))
        Audit.objects.filter(site_paused_until__isnull=False).update(
            site_paused_until=F("site_paused_until") - timedelta(seconds=seconds))


def started(owner, server: HostileServer, **fields) -> tuple[Audit, InlineDispatcher, DatabaseTimePasses]:
    audit = make_audit(owner, start_url=server.url("/"), allow_private=True, **fields)
    clock = DatabaseTimePasses()
    dispatcher = InlineDispatcher(sleep=clock)
    run_start(audit.pk, dispatcher)
    audit.refresh_from_db()
    assert audit.phase == Audit.Phase.CRAWLING, (audit.error_code, audit.error_detail)
    return audit, dispatcher, clock


def frontier(audit: Audit, server: HostileServer, path: str) -> FrontierURL:
    return FrontierURL.objects.get(audit=audit, url=server.url(path))


def stored(audit: Audit, server: HostileServer, path: str) -> Page | None:
    return Page.objects.filter(audit=audit, url=server.url(path)).first()


def assert_scheduled(row: FrontierURL, before, after, seconds: float, slack: float) -> None:
    """not_before is ``seconds`` after the write, which happened between ``before`` and ``after``."""
    assert before + timedelta(seconds=seconds - slack) <= row.not_before
    assert row.not_before <= after + timedelta(seconds=seconds + slack)


@pytest.mark.django_db
def test_retry_after_5_reschedules_the_url_5_s_ahead_and_the_rest_of_the_chunk_is_stored(
        owner, site, fast_settings):
    serve(site, {"/slow": ("5",)})
    audit, dispatcher, _ = started(owner, site)
    before = timezone.now()
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    after = timezone.now()
    row = frontier(audit, site, "/slow")
    assert (row.state, row.chunk, row.reschedules) == (FrontierURL.State.PENDING, None, 1)
    assert_scheduled(row, before, after, 5, slack=0.5)
    assert stored(audit, site, "/slow") is None  # not stored as a failure: it is coming back
    assert all(stored(audit, site, path).status_code == 200 for path in PLAIN)
    # Not finalized, and no busy loop: a wait until the URL is due, and no chunk
    # row open meanwhile (the watchdog must see a waiting audit, not a lost chunk).
    audit.refresh_from_db()
    assert (audit.status, audit.pages_crawled, audit.pages_failed) == (Audit.Status.RUNNING, 4, 0)
    assert dispatcher.steps == [("chunk", audit.pk, 1), ("wait", audit.pk, 1)]  # chunk 1 from start, run above
    # Waits what is left of the 5 s (less what the chunk took after the 429), never more.
    assert 2.0 < dispatcher.pauses[(audit.pk, 2)] <= 5.0
    assert not ChunkLease.objects.filter(audit=audit, number=2).exists()


@pytest.mark.django_db
def test_an_http_date_retry_after_schedules_the_url_for_that_time(owner, site, fast_settings):
    serve(site, {"/dated": (in_seconds(8),)})
    audit, dispatcher, _ = started(owner, site)
    before = timezone.now()
    run_chunk(audit.pk, 1, dispatcher)
    after = timezone.now()
    # An HTTP-date has whole seconds: the wait lies within a second of 8 s.
    assert_scheduled(frontier(audit, site, "/dated"), before, after, 8, slack=1.1)


@pytest.mark.django_db
def test_the_url_is_fetched_again_once_due_and_stored_once_while_999999_gives_up_at_once(
        owner, site, fast_settings):
    # /never first: /slow starts last, so no page waits out its pause of the site and the chunk ends at once.
    serve(site, {"/never": ("999999",) * 5, "/slow": ("5",)})
    audit, dispatcher, clock = started(owner, site)
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert len(clock.calls) == 1 and 2.0 < clock.calls[0] <= 5.0
    assert site.requests["/slow"] == 2
    assert Page.objects.filter(audit=audit, url=site.url("/slow")).count() == 1
    slow = stored(audit, site, "/slow")
    assert (slow.status_code, slow.fetch_error) == (200, "")
    assert site.requests["/never"] == 1
    never = stored(audit, site, "/never")
    assert (never.status_code, never.fetch_error) == (429, "rate_limited")
    assert "999999 s, more than the 600 s cap" in never.fetch_error_detail
    assert (audit.pages_crawled, audit.pages_failed) == (6, 1)


@pytest.mark.django_db
def test_a_url_still_throttled_after_the_reschedule_limit_is_stored_rate_limited(owner, site, fast_settings):
    serve(site, {"/always": ("5",) * 10})
    audit, dispatcher, clock = started(owner, site)
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    assert site.requests["/always"] == 1 + MAX_RESCHEDULES
    assert len(clock.calls) == MAX_RESCHEDULES
    page_row = stored(audit, site, "/always")
    assert page_row.fetch_error == "rate_limited"
    assert f"still rate limited after {MAX_RESCHEDULES} reschedules" in page_row.fetch_error_detail


@pytest.mark.django_db
def test_other_urls_of_the_chunk_are_not_held_up_by_a_long_retry_after(owner, site, fast_settings):
    # Twenty seconds: within the reschedule cap, far past the in-task one. A chunk
    # that slept it would take twenty seconds; this one ends as soon as the rest is in
    # (all on their way when the 429 came: what had not started would wait for the site).
    serve(site, {"/slow": ("20",)})
    audit, dispatcher, _ = started(owner, site)
    began = time.monotonic()
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    assert time.monotonic() - began < 10
    assert all(stored(audit, site, path) is not None for path in PLAIN)
    assert 15.0 < dispatcher.pauses[(audit.pk, 2)] <= 20.0


@pytest.mark.django_db
def test_a_rescheduled_page_keeps_its_place_in_the_page_budget(owner, site, fast_settings):
    # Budget of three: the start page, /slow (throttled) and /a. /b and /c must not
    # take /slow's place while it waits, or it would never be stored.
    serve(site, {"/slow": ("5",)}, plain=())
    site.route("/", static(page("/slow", "/a", "/b", "/c")))
    for path in PLAIN:
        site.route(path, static(page()))
    audit, dispatcher, _ = started(owner, site, max_pages=3, check_external=False)
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    urls = set(Page.objects.filter(audit=audit).values_list("url", flat=True))
    assert urls == {site.url("/"), site.url("/slow"), site.url("/a")}
    assert site.requests["/b"] == 0 and site.requests["/c"] == 0


@pytest.mark.django_db(transaction=True)
def test_the_watchdog_leaves_an_audit_waiting_on_a_retry_after_alone_and_starts_it_when_due(
        owner, site, fast_settings):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "STALL_SECONDS": 60}
    serve(site, {"/slow": ("300",)})
    audit, _, _ = started(owner, site)
    OrmQ.objects.all().delete()
    # The worker's dispatcher cannot enqueue a task for later: chunk 1 schedules nothing.
    assert run_chunk(audit.pk, 1, Dispatcher()) == "done"
    assert not ChunkLease.objects.filter(audit=audit, number=2).exists() and not OrmQ.objects.exists()
    # Quiet for longer than the stall limit, but waiting as the site asked: not stalled, not lost.
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=61))
    assert run_watchdog() == "nothing to do"
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING and not OrmQ.objects.exists()
    # Once the URL is due the next chunk starts at once (no grace: nothing else would start it).
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now())
    FrontierURL.objects.filter(audit=audit, url=site.url("/slow")).update(
        not_before=timezone.now() - timedelta(seconds=1))
    Audit.objects.filter(pk=audit.pk).update(site_paused_until=timezone.now() - timedelta(seconds=1))
    assert run_watchdog() == f"advanced {audit.pk} after chunk 1"
    assert queued_task_names() == {f"audit-{audit.pk}-chunk-2"}
    assert run_chunk(audit.pk, 2, Dispatcher()) == "done"
    assert stored(audit, site, "/slow").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_watchdog_checks_an_audit_waiting_near_its_page_limit_without_failing_its_pass(
        owner, site, fast_settings):
    """Near max_pages the page budget is exact and locks the audit's row: on PostgreSQL that needs a transaction,
    and without one the watchdog's pass died at this audit every 30 s, reconciling no other."""
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "STALL_SECONDS": 60}
    serve(site, {"/slow": ("300",)})
    audit, _, _ = started(owner, site)
    OrmQ.objects.all().delete()
    assert run_chunk(audit.pk, 1, Dispatcher()) == "done"
    audit.refresh_from_db()
    Audit.objects.filter(pk=audit.pk).update(max_pages=audit.pages_discovered + 1,
                                             heartbeat_at=timezone.now() - timedelta(seconds=61))
    assert run_watchdog() == "nothing to do"
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING


@pytest.mark.django_db
def test_a_rescheduled_url_is_not_taken_for_a_poison_url_on_a_later_serial_retry(chunk_writer):
    writer, items = chunk_writer
    item = items[0]
    writer.mark_try(item)  # a serial retry marks each URL before fetching it
    throttled_result = FetchResult(item.url, item.url, status=429, error=FetchError.RATE_LIMITED, retry_after=5.0)
    writer.write([PageOutcome(item.url, item.depth, throttled_result, None, (), ())])
    row = FrontierURL.objects.get(pk=item.id)
    # The fetch came back, so the URL did not kill the worker: the mark is cleared.
    assert (row.state, row.reschedules, row.tries) == (FrontierURL.State.PENDING, 1, 0)
    assert row.not_before is not None and not Page.objects.filter(url=item.url).exists()


@pytest.mark.django_db
def test_the_audit_command_says_it_is_waiting_and_stores_the_url_once_it_answers(
        owner, site, fast_settings, tmp_path, capsys, monkeypatch):
    from django.core.management import call_command

    from audits.management.commands.audit import Command

    serve(site, {"/slow": ("5",)})
    clock = DatabaseTimePasses()
    monkeypatch.setattr(Command, "sleep", staticmethod(clock))
    out = tmp_path / "report.jsonl"
    # Exit 0: no critical issue on this site (1 would raise SystemExit).
    call_command("audit", site.url("/"), "--allow-private", "--out", str(out))
    assert clock.calls and 4 <= clock.calls[0] <= 6
    assert "Waiting 5 s: the site asked us to come back later (Retry-After)" in capsys.readouterr().out
    records = [json.loads(line) for line in out.read_text().splitlines()]
    slow = [r for r in records if r["type"] == "page" and r["url"] == site.url("/slow")]
    assert len(slow) == 1 and slow[0]["status"] == 200
    assert site.requests["/slow"] == 2


async def bare_429(request, reader, writer, server) -> None:
    await respond(request, writer, server, status=429, body=b"<html>slow down</html>")


@pytest.mark.django_db
def test_a_page_throttled_without_a_retry_after_is_stored_at_once_within_the_request_bound(
        owner, site, fast_settings):
    serve(site, {"/bare": ()})
    site.route("/bare", bare_429)
    audit, dispatcher, clock = started(owner, site)
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    assert site.requests["/bare"] == 1 + FetchPolicy().max_retries  # one fetch's retries, no more rounds
    assert clock.calls == []
    assert stored(audit, site, "/bare").fetch_error == "rate_limited"


@pytest.mark.django_db
def test_a_throttled_external_link_is_stored_rate_limited_without_holding_the_audit(
        owner, site, fast_settings):
    with HostileServer() as elsewhere:
        elsewhere.route("/busy", throttled("5", "5", "5"))
        site.route("/", static(page(*PLAIN, elsewhere.url("/busy"))))
        for path in PLAIN:
            site.route(path, static(page()))
        audit, dispatcher, clock = started(owner, site, check_external=True)
        run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    assert clock.calls == [] and elsewhere.requests["/busy"] == 1
    external = Page.objects.get(audit=audit, url=elsewhere.url("/busy"))
    assert external.fetch_error == "rate_limited"


@pytest.mark.django_db
def test_a_cancel_during_the_in_process_wait_ends_it_without_another_chunk(owner, site, fast_settings):
    serve(site, {"/slow": ("300",)})
    audit, dispatcher, _ = started(owner, site)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:  # someone presses Cancel in the dashboard mid-wait
            Audit.objects.get(pk=audit.pk).cancel("Cancelled from the dashboard.")

    dispatcher.sleep = sleep
    run_steps(dispatcher)
    assert len(slept) == 2 and max(slept) <= 5.0  # seen at the next slice, not after 300 s
    assert not ChunkLease.objects.filter(audit=audit, number=2).exists()
    audit.refresh_from_db()
    assert audit.status == Audit.Status.CANCELLED


@pytest.mark.django_db
def test_a_site_that_throttles_after_a_few_requests_hears_nothing_until_its_retry_after_ends(
        owner, site, fast_settings):
    # 429 Retry-After: 4 once two pages were served: past the in-task cap, so the URL is rescheduled
    # and the rest of the chunk waits 4 s for the site (one request at a time: none is in flight
    # when the 429 comes). The external links, on another host, are checked meanwhile.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SIZE": 30, "CHUNK_SOFT_DEADLINE": 15.0}
    throttle, other = Throttle(allow=2, wait=4, body=page()), Arrivals(delay=0.3)
    pages = [f"/p{n}" for n in range(6)]
    with HostileServer() as elsewhere:
        externals = [elsewhere.url(f"/e{n}") for n in range(6)]
        for url in externals:
            elsewhere.route(urlsplit(url).path, other)
        site.route("/", static(page(*pages, *externals)))
        for path in pages:
            site.route(path, throttle)
        audit, dispatcher, clock = started(owner, site, concurrency=1, check_external=True)
        run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    # Only the page that was told to wait reached the site in its pause; the rest came after it.
    assert len(throttle.during_pause()) == 1
    assert len(throttle.arrivals) == len(pages) + 1  # that page once more, when due
    assert all((stored(audit, site, path).status_code, stored(audit, site, path).fetch_error) == (200, "")
               for path in pages)
    # The other host did not wait for the site's pause to end.
    assert len(other.times) == len(externals)
    assert all(t < throttle.paused_at + throttle.wait for t in other.times)
    assert max(other.times) > throttle.paused_at

"""One chunk of an audit: claim it, crawl its URLs through the rolling window, hand over."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models.functions import Now

from crawler.checks import PageContext
from crawler.fetch import Fetcher
from crawler.net import LookupLane
from crawler.page import REDIRECT_TAG, PageOutcome, check_resource, process_page, without_body
from crawler.robots import refused_landing
from crawler.share import Share
from crawler.side_lane import SideLane
from crawler.types import Link
from crawler.window import fetch_health, fetch_pause, run_window

from ..dispatch import Dispatcher
from ..knobs import knob
from ..models import Audit, ChunkLease, FrontierURL, Issue, Page
from .bridge import run_with_db_here
from .db_retry import (
    DatabaseBusy,
    DatabaseDown,
    beat_missed,
    close_connection,
    db_fault,
    with_db_retry,
)
from .progress import abandon_chunk, advance, page_budget, site_pause
from .rendering import browser, render_if_needed
from .robots_refresh import refresh_robots, refuse_disallowed, stale
from .session import SessionKeeper, SessionLost
from .setup import CrawlSetup, crawl_setup, internal_test
from .writer import AuditStopped, ChunkWriter, ClusterStopping, Item, LeaseLost, items_of

log = logging.getLogger(__name__)

# Pages written per transaction: bigger batches amortise the commit, the fence
# and the counters, smaller ones keep the crawl from waiting on a long write. A
# batch is also flushed after a second.
SUB_BATCH = 100
# A resource or external check counts half a page toward a sub-batch: its rows
# are small (no links, no body facts).
PAGE_WEIGHT = 2
# External checks run beside the window, not in it: other sites' slow or failing
# answers (a nameserver that takes 5 s to fail) must neither hold the audited
# site's slots nor shrink its window. Eight at once, two per host, on a Fetcher
# of their own whose lookups go through a LookupLane.
EXTERNAL_LANE = SideLane(slots=8, per_host=2)
EXTERNAL = Page.Kind.EXTERNAL
# The window's host for the audited site's own pages and resources (``host_of``).
SITE_HOST = ""
# How often a chunk running beside others rebalances its share of the audit's
# concurrency: a chunk that joins waits about this long for its part.
SHARE_SECONDS = 1.0


def claim(audit_id: int, number: int) -> ChunkLease | None:
    """Take chunk ``number`` of the audit, or None (done, leased by a live worker, or out of attempts)."""
    return ChunkLease.objects.claim(audit_id, number, seconds=knob("LEASE_SECONDS"),
                                    max_attempts=knob("MAX_CHUNK_ATTEMPTS"))


def run_chunk(audit_id: int, number: int, dispatcher: Dispatcher | None = None,
              on_batch: Callable[[list[PageOutcome], list[Issue], list[str]], None] | None = None) -> str:
    """Crawl chunk ``number`` of an audit. Returns what happened, for logs and tests.

    A database that stays busy or away past DB_RETRY_SECONDS ends the chunk
    normally ("db-busy", "db-unavailable"): the chunk is given back uncounted
    when the database lets us, else its lease expires and the watchdog retries.
    """
    dispatcher = dispatcher or Dispatcher()
    try:
        result = _run_chunk(audit_id, number, dispatcher, on_batch)
    except (DatabaseBusy, DatabaseDown) as exc:
        busy = isinstance(exc, DatabaseBusy)
        log.warning("audit %s chunk %s: %s; giving the chunk back", audit_id, number, exc)
        lease = getattr(exc, "lease", None)
        if lease is not None:
            try:
                given = with_db_retry(lease.give_back, what=f"audit {audit_id} chunk {number} give-back")
            except (DatabaseBusy, DatabaseDown):
                log.warning("audit %s chunk %s: could not give the chunk back; its lease will expire",
                            audit_id, number)
            else:
                if given:
                    dispatcher.given_back(audit_id, number)
        if busy:
            return "db-busy"
        close_connection()
        return _unreachable(audit_id, number)
    _UNREACHABLE_SINCE.pop(audit_id, None)
    return result


# When this process first and last failed to reach the database for an audit's chunk
# (time.monotonic()), until one of its chunks gets through again. A failure longer than
# DB_UNAVAILABLE_SECONDS after the last is a new outage: this process may have run no
# chunk of that audit in between, and hours-old outages must not add up.
_UNREACHABLE_SINCE: dict[int, tuple[float, float]] = {}


def _unreachable(audit_id: int, number: int) -> str:
    """A chunk gave up on an unreachable database: past DB_UNAVAILABLE_SECONDS, fail the audit, unless
    other workers are still beating it.

    Best effort: recording the failure needs the database too. Until then the
    chunk's lease expires and the watchdog runs it again.
    """
    now = time.monotonic()
    since, last = _UNREACHABLE_SINCE.get(audit_id, (now, now))
    if now - last > knob("DB_UNAVAILABLE_SECONDS"):
        since = now
    if since == now:
        since = now - knob("DB_RETRY_SECONDS")  # the chunk tried that long before giving up
    _UNREACHABLE_SINCE[audit_id] = (since, now)
    if now - since < knob("DB_UNAVAILABLE_SECONDS"):
        return "db-unavailable"
    detail = f"The database could not be reached for {int(now - since)} s (chunk {number})."
    try:
        # Other workers (clusters on other machines) beating the audit reach the database: the trouble
        # is this process's (its link, a statement timing out), and the audit goes on without it.
        recent = Now() - timedelta(seconds=knob("DB_RETRY_SECONDS"))
        if Audit.objects.filter(pk=audit_id, heartbeat_at__gte=recent).exists():
            return "db-unavailable"
        failed = Audit.objects.get(pk=audit_id).fail(Audit.ErrorCode.DB_UNAVAILABLE, detail, Audit.Phase.CRAWLING)
    except Exception as exc:
        if db_fault(exc) is None:
            raise
        close_connection()
        return "db-unavailable"
    _UNREACHABLE_SINCE.pop(audit_id, None)
    return "failed" if failed else "db-unavailable"


def _run_chunk(audit_id: int, number: int, dispatcher: Dispatcher,
               on_batch: Callable[[list[PageOutcome], list[Issue], list[str]], None] | None) -> str:
    what = f"audit {audit_id} chunk {number}"
    audit = with_db_retry(lambda: Audit.objects.get(pk=audit_id), what=f"{what} read")
    if audit.status != Audit.Status.RUNNING or audit.phase != Audit.Phase.CRAWLING:
        with_db_retry(lambda: ChunkLease.objects.filter(audit=audit, number=number).void(), what=f"{what} close")
        return "audit-not-running"
    if stale(audit):  # read before the claim: a slow robots.txt costs no lease
        refresh_robots(audit)
    lease = with_db_retry(claim, audit_id, number, what=f"{what} claim")
    if lease is None:
        lease = ChunkLease.objects.filter(audit=audit, number=number).first()
        if lease and lease.state == ChunkLease.State.LEASED and lease.attempts >= knob("MAX_CHUNK_ATTEMPTS") \
                and lease.expired():
            abandon_chunk(lease, dispatcher)
            return "abandoned"
        return "refused"
    try:
        return _crawl_claimed(audit, lease, dispatcher, on_batch)
    except (DatabaseBusy, DatabaseDown) as exc:
        exc.lease = lease  # for run_chunk to give back
        raise


def _crawl_claimed(audit: Audit, lease: ChunkLease, dispatcher: Dispatcher,
                   on_batch: Callable[[list[PageOutcome], list[Issue], list[str]], None] | None) -> str:
    audit_id, number = audit.pk, lease.number
    what = f"audit {audit_id} chunk {number}"
    # A retry after a worker death runs one URL at a time, each marked first,
    # so a URL that kills its worker is found and recorded as lost.
    serial = lease.attempts > 1
    items = with_db_retry(lease_items, audit, lease, what=f"{what} lease")
    try:
        setup = crawl_setup(audit)
    except SessionLost as exc:
        return _session_lost(audit, lease, exc, what)
    items = with_db_retry(refuse_disallowed, audit, setup.robots, setup.user_agent, lease, items,
                          what=f"{what} robots.txt")
    # Chunks running beside others share the audit's concurrency and rate.
    parallel = dispatcher.chunks_per_audit() > 1
    share = Share(limit=0) if parallel else None
    writer = ChunkWriter(audit, lease, setup, on_batch=on_batch, dispatcher=dispatcher if parallel else None)
    writer.hold(items)
    lease_seconds = knob("LEASE_SECONDS")
    next_fence = time.monotonic()
    # When the site's stored pause ends (``time.monotonic()``), for the window: read as the chunk starts, and
    # at every rebalance when chunks run side by side, so a Retry-After one of them is given holds the rest.
    # Only this thread writes it, only ever later; the window reads it before it starts anything.
    site_resume = {SITE_HOST: 0.0}

    def heartbeat() -> None:
        # A missed beat is not fatal (the lease lasts three): a busy or lost
        # database is the next write's to retry or give up on.
        nonlocal next_fence
        try:
            if share is not None:
                split = lease.rebalance(setup.window.cap, share.in_flight)
                if split is not None:
                    share.limit, share.parts = split
                if left := site_pause(audit):
                    site_resume[SITE_HOST] = max(site_resume[SITE_HOST], time.monotonic() + left)
            if time.monotonic() < next_fence:
                return
            next_fence = time.monotonic() + lease_seconds / 3
            stopping = not lease.fence(lease_seconds) and lease.stopping()
        except Exception as exc:
            beat_missed(exc, what)
            return
        if stopping:
            raise ClusterStopping()

    try:
        if serial:
            items = writer.drop_poison(items)
        if share is not None:
            heartbeat()  # the first share, before anything starts
        # What is left of a pause the site asked an earlier chunk for: nothing starts on the site before it ends.
        site_resume[SITE_HOST] = time.monotonic() + with_db_retry(site_pause, audit, what=f"{what} site pause")
        # The lease lasts three heartbeats: a worker that dies is found after
        # that, not after a long lease (writes also extend it). A shared
        # budget is rebalanced every SHARE_SECONDS between them.
        report = run_with_db_here(lambda db: crawl_items(items, setup, writer, db, serial=serial, share=share,
                                                         paused_until=site_resume),
                                  idle=heartbeat,
                                  idle_every=min(SHARE_SECONDS, lease_seconds / 3) if share else lease_seconds / 3)
    except LeaseLost:
        log.warning("audit %s chunk %s: lease reclaimed by another worker; stopping", audit_id, number)
        return "lease-lost"
    except SessionLost as exc:
        return _session_lost(audit, lease, exc, what)
    except AuditStopped:
        def stop() -> None:
            lease.release()
            lease.finish()
        with_db_retry(stop, what=f"{what} stop")
        return "stopped"
    except ClusterStopping:
        # What was written stays; what was not goes back to the frontier, and the
        # next chunk is queued now for a cluster that is not stopping.
        def hand_back() -> None:
            with transaction.atomic():
                lease.release()
                if lease.finish():
                    advance(audit, number, dispatcher)
        log.info("%s: the cluster is stopping; handing the chunk's URLs back", what)
        with_db_retry(hand_back, what=f"{what} hand-back")
        return "handed-back"

    def hand_over() -> bool:
        with transaction.atomic():
            if not lease.finish():
                return False
            # A serial retry says nothing about the site's load: the next chunk
            # keeps the last real window.
            if not serial:
                audit.keep_window(report.final)
            audit.beat(chunks_done=1)
            advance(audit, number, dispatcher)
        return True

    mark = dispatcher.mark()

    def hand_over_once() -> bool:
        # A try that rolled back must not leave the step it scheduled behind.
        dispatcher.forget_since(mark)
        return hand_over()

    if not with_db_retry(hand_over_once, what=f"{what} hand-over"):
        return "lease-lost"
    return "done"


def _session_lost(audit: Audit, lease: ChunkLease, exc: SessionLost, what: str) -> str:
    """The site's session cannot be had: the audit fails as login_failed, what was crawled kept."""
    def stop() -> None:
        lease.release()
        lease.finish()
        audit.fail(Audit.ErrorCode.LOGIN_FAILED, str(exc), Audit.Phase.CRAWLING)
    with_db_retry(stop, what=f"{what} login failed")
    return "login-failed"


def lease_items(audit: Audit, lease: ChunkLease) -> list[Item]:
    """The URLs of this chunk: the ones a previous try held, or up to CHUNK_SIZE fresh ones."""
    with transaction.atomic():
        held = FrontierURL.objects.held_by(lease)
        if not held.exists():
            FrontierURL.objects.lease_next(lease, knob("CHUNK_SIZE"), budget=page_budget(audit))
        items = items_of(held)
        lease.count_urls(len(items))
    return items


async def crawl_items(items: list[Item], setup: CrawlSetup, writer: ChunkWriter, db, *, serial: bool,
                      share: Share | None = None, paused_until: dict[str, float] | None = None):
    """Fetch, parse and check ``items`` through the rolling window; sub-batches go to ``writer`` via ``db``.

    Nothing starts on the audited site before ``paused_until[SITE_HOST]`` (a ``time.monotonic()`` value:
    the end of its stored Retry-After pause, which the caller may move later as the crawl goes on); the
    external checks go on meanwhile.
    """
    deadline = time.monotonic() + knob("CHUNK_SOFT_DEADLINE")
    context = PageContext(setup.checks, is_internal=internal_test(setup.scope))
    window = setup.window
    css_depth = writer.audit.max_depth + 1
    if serial:
        window = replace(window, floor=1, start=1, cap=1, per_host=1)

    async with (Fetcher(setup.policy, setup.guard, concurrency=window.cap, credentials=setup.credentials,
                        avoid=setup.avoid) as fetcher,
                Fetcher(setup.policy, setup.guard.in_lane(LookupLane()),
                        concurrency=EXTERNAL_LANE.slots) as checker,
                browser(setup) as renderer):

        session = SessionKeeper(writer.audit, setup.login, fetcher, db,
                                followers=(renderer.fetcher,) if renderer is not None else (),
                                session_login=setup.session_login)

        async def work(item: Item) -> PageOutcome:
            if serial:
                await db(writer.mark_try, item)
            if item.kind == Page.Kind.PAGE:
                ctx = PageContext(context.settings, context.is_internal, in_sitemap=item.in_sitemap)
                previous = writer.previous.get(item.url_hash)
                outcome = await session.fetch(lambda: process_page(fetcher, item.url, item.depth, ctx,
                                                                   previous=previous))
                outcome = await render_if_needed(renderer, refused_redirect_edge(outcome, setup), setup, ctx)
                return without_body(outcome)
            if item.kind == Page.Kind.RESOURCE:
                # Resources are internal; a stylesheet is read one level below the
                # deepest page, so @import chains end with the crawl's depth.
                return await session.fetch(lambda: check_resource(fetcher, item.url, item.depth, context,
                                                                  read_css=item.depth <= css_depth))
            result = await checker.check(item.url)
            return PageOutcome(item.url, item.depth, result, None, (), ())

        async def sink(outcomes: list[PageOutcome]) -> None:
            await db(writer.write, outcomes)

        async def refill() -> list[Item]:
            return await db(writer.top_up)

        done = await run_window(
            items, work, sink, policy=window, host_of=host_of,
            health_of=lambda outcome: fetch_health(outcome.result, window),
            # A Retry-After holds the site's next requests, not only its URL (the writer reschedules that).
            pause_of=lambda outcome: fetch_pause(outcome.result),
            paused_until=paused_until,
            soft_deadline=deadline, max_batch_wait=1.0,
            batch_size=1 if serial else SUB_BATCH * PAGE_WEIGHT, weight_of=None if serial else weight,
            # A serial retry runs exactly the URLs the chunk held, to find a poison one.
            refill=None if serial else refill,
            # ... and one at a time, so its external checks stay in the window.
            side_lane=None if serial else EXTERNAL_LANE, in_side_lane=None if serial else is_external,
            share=share,
        )
        await session.store()
        return done


def refused_redirect_edge(outcome: PageOutcome, setup: CrawlSetup) -> PageOutcome:
    """A page whose redirect was not followed because robots.txt disallows where it points, or because it
    leaves the site while other sites are not contacted (``setup.avoid``), with that URL as its one edge
    (tag ``redirect``): admission records the first as blocked by robots, as a link's, and leaves the second."""
    where = refused_landing(outcome.result, lambda url: setup.robots_refuse(url) or setup.off_site(url))
    return outcome if where is None else replace(outcome, outlinks=(Link(where, REDIRECT_TAG),))


def is_external(item: Item) -> bool:
    return item.kind == EXTERNAL


def host_of(item: Item) -> str:
    """The host an item's per-host limit counts against: the site's pages and resources share one."""
    return urlsplit(item.url).netloc if item.kind == EXTERNAL else SITE_HOST


def weight(outcome: PageOutcome) -> int:
    """What a result counts toward a sub-batch: a parsed page PAGE_WEIGHT, a check 1."""
    return PAGE_WEIGHT if outcome.facts is not None else 1



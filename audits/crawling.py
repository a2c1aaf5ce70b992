"""Turning the crawl library into an audit: start, one chunk at a time, then finalize.

The functions here are what the django-q2 tasks (``tasks.py``) and the ``audit``
command both run; only the way the next step is scheduled differs (a
``Dispatcher``). Every function is safe to run twice: django-q2 delivers at
least once and the watchdog may re-enqueue.

The lease protocol, in short:

1. ``claim_chunk`` takes chunk *n* with one conditional UPDATE that counts the
   attempt, sets a fresh owner token and an expiry from the database clock.
   A finished chunk, a live lease or a spent attempt budget refuses the claim.
2. The chunk leases up to CHUNK_SIZE pending URLs by marking them with its
   number; a retry of *n* re-receives exactly the URLs still marked. While
   its last URLs run, it tops up with up to CHUNK_SIZE more pages at no
   greater click depth, and more checks than that (``ChunkWriter.top_up``,
   fenced like a write), so fetching does not pause between chunks; a retry
   runs only what it held.
3. Every write of the chunk happens in a transaction that first extends the
   lease *by token*; when the token no longer matches (the lease was reclaimed
   from a zombie), nothing is written and the chunk stops.
4. At its soft deadline the chunk hands back what it did not start, marks itself
   done and schedules chunk *n+1* or finalize.

No network I/O happens inside a transaction and no lock is held across a fetch:
fetching runs in the event loop, writes run in one database thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import operator
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Max, Min, Q
from django.db.models.functions import Now
from django.utils import timezone

from crawler import loop as crawl_loop
from crawler.checks import CheckSettings, PageContext, run_page_checks
from crawler.fetch import Fetcher, FetchPolicy
from crawler.gcpolicy import crawl_gc
from crawler.http_probe import probe_http_form
from crawler.net import AddressGuard
from crawler.page import PAGE_TAGS, PageOutcome, build_outcome, process_page
from crawler.robots import Robots, load_robots
from crawler.sitemap import discover_sitemaps
from crawler.types import FetchError, FetchResult, Finding
from crawler.urls import (
    InvalidURL,
    Scope,
    compile_patterns,
    normalize,
    origin_of,
    template_key,
    trap_reason,
    url_hash,
)
from crawler.window import WindowPolicy, fetch_health, run_window

from . import bulk
from .frontier_memo import memo_for
from .lookups import pg_array
from .models import Audit, ChunkLease, FrontierURL, Issue, LinkEdge, Page

log = logging.getLogger(__name__)

RESOURCE_TAGS = frozenset({"img", "script", "link", "iframe", "source", "video", "audio", "embed", "object"})
# Crawler traps (an endless calendar, "next" links forever) show up as one path
# template (``/cal?month={n}``) whose variants keep getting deeper: each new one
# is found on the previous one. A shop's ``/product/{n}`` pages share a template
# too, but sit at about the same depth. So a template is cut once it has
# TRAP_VARIANTS variants AND a new one would lie more than TRAP_DEPTH_SPREAD
# clicks below the template's shallowest variant; TEMPLATE_CEILING bounds any
# single template outright.
TRAP_VARIANTS = 50
TRAP_DEPTH_SPREAD = 5
TEMPLATE_CEILING = 100_000
# Pages written per transaction: bigger batches amortise the commit, the lease
# fence and the counters; a batch is also flushed after a second (max_batch_wait).
# 1,000-page audits on PostgreSQL, two alternating runs each: at 50 the crawl
# waited on the database thread for 1.3-1.6 s and the audit took 11.0-12.5 s;
# at 100, 0.6 s and 9.0-9.5 s (database thread busy 4.2-4.5 s, not 5.9-6.6 s;
# SQLite 7.0-7.2 s). At 200 each top-up waited behind longer writes and the
# crawl ran short of work instead (9.0-10.1 s; SQLite 7.7-8.7 s).
SUB_BATCH = 100
# A resource or external check counts half a page toward a sub-batch (_weight):
# its rows are small (no links, no body facts), so the transaction's fixed costs
# (fence, counters, commit, the status read) were much of a write of checks.
# Writing twice as many checks at once took 1,000-page SQLite audits (four
# interleaved pairs) from 17.0, 15.9, 14.6, 14.0 s to 13.1, 14.8, 13.3, 12.3 s.
# By weight rather than by the chunk's first lease, since a chunk that tops up
# (ChunkWriter.top_up) runs pages and checks mixed: sized by its first lease,
# a chunk begun with pages wrote its later thousands of checks 50 at a time, a
# third more writes on PostgreSQL.
PAGE_WEIGHT = 2
# Sources per DELETE of re-written link edges (one statement per sub-batch).
DELETE_BATCH = 50
WORKER_LOST_DETAIL = "The worker crawling this URL died on every try"
# Retry-After on a 429 or 503 (RELIABILITY #24). A wait up to RETRY_AFTER_IN_TASK
# is slept inside the fetch: only that URL's window slot waits. A longer one, up
# to RETRY_AFTER_RESCHEDULE_CAP, puts the URL back in the frontier with a
# not_before, so the chunk goes on and ends on time; at most MAX_RESCHEDULES
# times, after which (or past the cap) the URL is stored as rate_limited.
RETRY_AFTER_IN_TASK = 3.0
RETRY_AFTER_RESCHEDULE_CAP = 600.0
MAX_RESCHEDULES = 3
# Start cannot reschedule (robots.txt and the start page decide whether there is
# a crawl at all), so it waits in-task as long as the fetcher's default allows.
START_RETRY_AFTER_CAP = FetchPolicy.retry_after_cap


class Candidate(NamedTuple):
    """A URL a page links to that the crawl may fetch, before the frontier has seen it."""

    url: str
    depth: int
    found_on: str
    kind: str


class LeaseLost(Exception):
    """Our lease was reclaimed (we are a zombie): write nothing more."""


class AuditStopped(Exception):
    """The audit was cancelled or failed while this chunk ran."""


def knob(name: str):
    return settings.SITEWARD[name]


# --- scheduling the next step -------------------------------------------------------


class Dispatcher:
    """How the next step runs. The task dispatcher enqueues it after commit."""

    def chunk(self, audit_id: int, number: int) -> None:
        from .services import enqueue

        enqueue("audits.tasks.crawl_chunk", audit_id, number, name=f"audit-{audit_id}-chunk-{number}")

    def finalize(self, audit_id: int) -> None:
        from .services import enqueue

        enqueue("audits.tasks.finalize", audit_id, name=f"audit-{audit_id}-finalize")

    def wait(self, audit: Audit, after: int, seconds: float) -> None:
        """Only rate-limited URLs are left, the first due in ``seconds``: schedule nothing yet.

        django-q2 cannot delay a task, and a chunk that slept would hold a worker,
        so the watchdog (every minute) advances the audit once one is due.
        """
        log.info("audit %s: waiting %.0f s for a Retry-After before chunk %s", audit.pk, seconds, after + 1)


@dataclass
class InlineDispatcher(Dispatcher):
    """For the ``audit`` command: remember the next step; the command's loop runs it.

    Steps run only after the call that scheduled them has returned, and so after
    its transaction committed; a step whose transaction rolled back finds its
    chunk row missing or its audit in another state and does nothing.
    """

    steps: list[tuple[str, int, int]] = field(default_factory=list)
    # Nothing else runs in this process while rate-limited URLs wait, so the
    # loop sleeps until the first is due (audits.inline), in slices of `sleep`.
    sleep: Callable[[float], object] = time.sleep
    # Told once per wait, with its length (the command prints it).
    on_wait: Callable[[float], object] = lambda seconds: None
    pauses: dict[tuple[int, int], float] = field(default_factory=dict)

    def chunk(self, audit_id: int, number: int) -> None:
        self.steps.append(("chunk", audit_id, number))

    def finalize(self, audit_id: int) -> None:
        self.steps.append(("finalize", audit_id, 0))

    def wait(self, audit: Audit, after: int, seconds: float) -> None:
        # No lease row for the next chunk yet: during the wait nothing is open,
        # so the watchdog sees an audit waiting as the site asked, not a chunk
        # lost or a stall. The loop advances after the wait.
        self.pauses[(audit.pk, after + 1)] = min(seconds, RETRY_AFTER_RESCHEDULE_CAP)
        self.steps.append(("wait", audit.pk, after))


# --- what an audit's settings mean to the crawler ------------------------------------


@dataclass(frozen=True)
class CrawlSetup:
    guard: AddressGuard
    policy: FetchPolicy
    scope: Scope | None
    robots: Robots
    window: WindowPolicy
    checks: CheckSettings
    user_agent: str


def fault_injection_marker() -> str:
    """Test-only fault injection: a URL containing this string kills its worker.

    Used by the orchestration tests to prove a poison URL cannot kill workers
    forever; unset (the default) it does nothing.
    """
    return os.environ.get("SITEWARD_FAULT_KILL_WORKER_ON", "")


def crawl_setup(audit: Audit) -> CrawlSetup:
    user_agent = audit.user_agent or knob("USER_AGENT")
    allow_private = audit.allow_private or knob("ALLOW_PRIVATE_TARGETS")
    policy = FetchPolicy(user_agent=user_agent, deadline=knob("FETCH_DEADLINE"),
                         retry_after_cap=RETRY_AFTER_IN_TASK, reschedule_cap=RETRY_AFTER_RESCHEDULE_CAP)
    robots = Robots.from_stored(audit.robots_status or "ignored", audit.robots_http_status, audit.robots_body)
    delay = robots.crawl_delay(user_agent) if audit.respect_robots else None
    cap = max(1, audit.concurrency)
    # A chunk starts where the previous one left the window (Audit.current_window),
    # so what the site has shown about its load carries over: a window that had
    # grown is not ramped up again from 4 every ~200 URLs, and one that had
    # shrunk under errors or throttling stays small. The first chunk starts at 4.
    # Never below 2, though: slow answers (over 2 s, or bodies over 2 MB) halve
    # the window and never grow it, so a chunk of large images would otherwise
    # leave every later chunk at one URL at a time.
    start = min(max(audit.current_window or 4, 2), cap)
    window = WindowPolicy(
        floor=1, start=start, cap=cap, per_host=cap, rate=audit.rate, crawl_delay=delay or 0.0
    )
    scope = None
    if audit.origin:
        scope = Scope(audit.origin, tuple(audit.patterns("include")), tuple(audit.patterns("exclude")))
    return CrawlSetup(AddressGuard(allow_private=allow_private), policy, scope, robots, window,
                      CheckSettings(), user_agent)


def issue_key(code: str, url: str, target: str | None = None, extra: str = "") -> str:
    raw = "\x1f".join((code, url, target or "", extra))
    return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


@dataclass(slots=True)
class IssueRow:
    """An issue on its way into the table: what ``insert_issues`` writes.

    Not a model instance: an audit makes hundreds of thousands of these, and
    Django's Model.__init__ was ~6% of an audit's CPU (profiled) for objects
    that are only ever turned back into tuples.
    """

    audit_id: int
    page_id: int | None
    url: str
    code: str
    severity: str
    message: str
    target_url: str
    key: str


def issue_row(audit_id: int, page_id: int | None, url: str, finding: Finding, key: str | None = None) -> IssueRow:
    """The row for ``finding`` on ``url``; ``key`` replaces the default stable key when a
    check keys its issues on more than the code, URL, target and message."""
    if key is None:
        key = issue_key(finding.code, url, finding.target_url, finding.message if not finding.target_url else "")
    return IssueRow(
        audit_id=audit_id, page_id=page_id, url=url, code=finding.code, severity=finding.severity.value,
        message=finding.message[:2000], target_url=finding.target_url or "", key=key,
    )


def clean(text: str | None, limit: int) -> str:
    """Crawled text on its way into the database: no NULs (PostgreSQL refuses them), capped."""
    if not text:
        return ""
    return text.replace("\x00", "")[:limit]


# --- start -------------------------------------------------------------------------


def run_start(audit_id: int, dispatcher: Dispatcher | None = None, on_batch=None) -> None:
    """Resolve the start URL, read robots.txt and sitemaps, seed the frontier, schedule chunk 1."""
    dispatcher = dispatcher or Dispatcher()
    audit = Audit.objects.get(pk=audit_id)
    if audit.status == Audit.Status.QUEUED:
        audit.start()
    elif not (audit.status == Audit.Status.RUNNING and audit.phase == Audit.Phase.STARTING):
        return  # a duplicate delivery after start already finished, or an ended audit
    if audit.status != Audit.Status.RUNNING:
        return

    try:
        start_url = normalize(audit.start_url)
    except InvalidURL as exc:
        audit.fail(Audit.ErrorCode.START_URL_INVALID, str(exc), Audit.Phase.STARTING)
        return

    setup = crawl_setup(audit)
    outcome = crawl_loop.run(_start_async(audit, start_url, setup))
    if outcome.error_code:
        audit.fail(outcome.error_code, outcome.error_detail, Audit.Phase.STARTING)
        return

    with transaction.atomic():
        if not Audit.objects.filter(pk=audit.pk, status=Audit.Status.RUNNING,
                                    phase=Audit.Phase.STARTING).exists():
            return
        robots = outcome.robots
        Audit.objects.filter(pk=audit.pk).update(
            robots_status=robots.status, robots_http_status=robots.http_status, robots_body=robots.body,
            sitemap_found=outcome.sitemap_found,
        )
        audit.begin_crawl(outcome.origin)
        scope = Scope(outcome.origin, tuple(audit.patterns("include")), tuple(audit.patterns("exclude")))
        _write_site_issues(audit, outcome)
        seeds = [FrontierURL(audit=audit, url=outcome.start_url, url_hash=url_hash(outcome.start_url),
                             depth=0, linked=True, template_key=_tkey(outcome.start_url))]
        for url in outcome.sitemap_urls:
            if not scope.contains(url) or trap_reason(url):
                continue
            if audit.respect_robots and not robots.allowed(url, setup.user_agent):
                continue
            # Sitemap-only URLs queue behind everything reached by links (depth =
            # max_depth); a link that reaches one later gives it its click depth.
            seeds.append(FrontierURL(audit=audit, url=url, url_hash=url_hash(url), depth=audit.max_depth,
                                     in_sitemap=True, template_key=_tkey(url)))
        FrontierURL.objects.bulk_create(seeds, ignore_conflicts=True, batch_size=1000)
        # The start page goes through the ordinary fenced writer as "chunk 0".
        FrontierURL.objects.filter(audit=audit, url_hash=url_hash(outcome.start_url)).update(
            depth=0, linked=True, state=FrontierURL.State.LEASED, chunk=0
        )
        discovered = FrontierURL.objects.filter(audit=audit, kind=Page.Kind.PAGE, skip_reason="").count()
        Audit.objects.filter(pk=audit.pk).update(pages_discovered=discovered, heartbeat_at=timezone.now())
        ChunkLease.objects.get_or_create(audit=audit, number=0)
        claim = claim_chunk(audit.pk, 0)
        audit.refresh_from_db()
        ChunkWriter(audit, claim.lease, crawl_setup(audit), on_batch=on_batch).write(outcome.pages)
        _finish_chunk(claim.lease)
        landing = outcome.pages[-1].result
        if landing.status is not None and landing.status >= 500:
            # Retries are spent and the site's front door is down: say so rather
            # than "complete" an audit of one error page. The page row stays.
            audit.fail(Audit.ErrorCode.SITE_UNAVAILABLE,
                       f"The start page {landing.final_url} answered {landing.status} "
                       f"after {landing.attempts} attempt{'s' if landing.attempts != 1 else ''}.",
                       Audit.Phase.STARTING)
            return
        advance(audit, 0, dispatcher)


@dataclass
class StartOutcome:
    start_url: str = ""
    origin: str = ""
    robots: Robots | None = None
    sitemap_urls: tuple[str, ...] = ()
    sitemap_found: bool | None = None
    sitemap_problems: list[tuple[str, str]] = field(default_factory=list)  # (url, problem)
    pages: list[PageOutcome] = field(default_factory=list)  # the start page, fetched once here
    error_code: str = ""
    error_detail: str = ""


async def _start_async(audit: Audit, start_url: str, setup: CrawlSetup) -> StartOutcome:
    policy = dataclasses.replace(setup.policy, retry_after_cap=START_RETRY_AFTER_CAP, reschedule_cap=0.0)
    async with Fetcher(policy, setup.guard, concurrency=4) as fetcher:
        first = await fetcher.fetch(start_url)
        if first.error is not None and first.status is None:
            code = {
                FetchError.SSRF_BLOCKED: Audit.ErrorCode.SSRF_BLOCKED,
                FetchError.DNS_FAILURE: Audit.ErrorCode.START_URL_UNRESOLVABLE,
                FetchError.INVALID_URL: Audit.ErrorCode.START_URL_INVALID,
            }.get(first.error, Audit.ErrorCode.START_URL_UNREACHABLE)
            return StartOutcome(error_code=code, error_detail=f"{first.error.label}: {first.error_detail}".strip(": "))
        # Anchor the crawl on where the start URL really lives (apex -> www,
        # http -> https), so a host-changing redirect doesn't end the crawl.
        final = normalize(first.final_url or start_url)
        origin = origin_of(final)
        robots = await load_robots(fetcher, origin, ignore=not audit.respect_robots)
        if robots.status == "unavailable":
            return StartOutcome(
                error_code=Audit.ErrorCode.ROBOTS_UNREACHABLE,
                error_detail=f"{origin}/robots.txt: {robots.detail} Search engines treat this as "
                             "'disallow everything', so Siteward crawls nothing (RFC 9309). Fix robots.txt "
                             "or untick 'respect robots.txt' to audit a site you own.",
            )
        report = await discover_sitemaps(fetcher, origin, robots.sitemaps)
        # http_not_redirected: does the http:// form of an https start page still serve it?
        plain_http = await probe_http_form(fetcher, final)
    problems = [(f.url, f.problem) for f in report.files if f.problem]
    # The start page was fetched above; record it instead of fetching it again.
    # A typed URL that redirects is its own row (with its chain), as any
    # redirecting URL is; the page it lands on is the crawl's depth-0 page.
    ctx = PageContext(setup.checks, is_internal=_internal_test(Scope(origin)))
    pages = []
    if final != start_url:
        pages.append(PageOutcome(start_url, 0, first, None, tuple(run_page_checks(first, None, ctx)), ()))
        first = dataclasses.replace(first, url=final, redirects=())
    pages.append(build_outcome(first, final, 0, ctx))
    if plain_http is not None:  # stored on the start page's row by the ordinary chunk writer
        pages[-1] = dataclasses.replace(pages[-1], findings=(*pages[-1].findings, plain_http))
    return StartOutcome(
        start_url=final, origin=origin, robots=robots, sitemap_urls=tuple(report.urls),
        sitemap_found=report.found, sitemap_problems=problems, pages=pages,
    )


def _write_site_issues(audit: Audit, outcome: StartOutcome) -> None:
    """Site-level findings from start: robots.txt and sitemap problems."""
    from crawler.catalogue import finding

    robots_url = f"{outcome.origin}/robots.txt"
    found: list[tuple[str, Finding]] = []
    if outcome.robots.status == "missing":
        found.append((robots_url, finding(
            "robots_txt_missing", f"robots.txt answered {outcome.robots.http_status}; crawlers may fetch everything.")))
    if not outcome.sitemap_found:
        found.append((f"{outcome.origin}/sitemap.xml", finding(
            "sitemap_missing", "No Sitemap: line in robots.txt and nothing at /sitemap.xml.")))
    for url, problem in outcome.sitemap_problems:
        found.append((url, finding("sitemap_invalid", problem)))
    insert_issues([issue_row(audit.pk, None, url, f) for url, f in found])


def _tkey(url: str) -> str:
    return hashlib.blake2b(template_key(url).encode(), digest_size=16).hexdigest()


def _schedule_chunk(audit: Audit, number: int, dispatcher: Dispatcher) -> None:
    """Create chunk ``number``'s lease row and schedule it, once (the row is the guard)."""
    _, created = ChunkLease.objects.get_or_create(audit=audit, number=number)
    if created:
        dispatcher.chunk(audit.pk, number)


# --- one chunk ---------------------------------------------------------------------


@dataclass
class Claim:
    lease: ChunkLease
    serial: bool  # a retry after a worker death: one URL at a time, each marked first


def claim_chunk(audit_id: int, number: int) -> Claim | None:
    """Take chunk ``number`` or refuse (done, leased by a live worker, or out of attempts)."""
    token = ChunkLease.new_token()
    ttl = timedelta(seconds=knob("LEASE_SECONDS"))
    claimable = Q(state=ChunkLease.State.QUEUED) | Q(state=ChunkLease.State.LEASED, leased_until__lt=Now())
    updated = ChunkLease.objects.filter(
        claimable, audit_id=audit_id, number=number, attempts__lt=knob("MAX_CHUNK_ATTEMPTS")
    ).update(
        state=ChunkLease.State.LEASED, token=token, attempts=F("attempts") + 1,
        leased_until=Now() + ttl, worker_pid=os.getpid(), started_at=Now(),
    )
    if not updated:
        return None
    lease = ChunkLease.objects.get(audit_id=audit_id, number=number)
    return Claim(lease, serial=lease.attempts > 1)


def run_chunk(audit_id: int, number: int, dispatcher: Dispatcher | None = None,
              on_batch: Callable[[list[PageOutcome], list[IssueRow]], None] | None = None) -> str:
    """Crawl chunk ``number`` of an audit. Returns what happened, for logs and tests."""
    dispatcher = dispatcher or Dispatcher()
    audit = Audit.objects.get(pk=audit_id)
    if audit.status != Audit.Status.RUNNING or audit.phase != Audit.Phase.CRAWLING:
        ChunkLease.objects.filter(audit=audit, number=number).exclude(state=ChunkLease.State.DONE).update(
            state=ChunkLease.State.ABANDONED)
        return "audit-not-running"
    claim = claim_chunk(audit_id, number)
    if claim is None:
        lease = ChunkLease.objects.filter(audit=audit, number=number).first()
        if lease and lease.state == ChunkLease.State.LEASED and lease.attempts >= knob("MAX_CHUNK_ATTEMPTS") \
                and ChunkLease.objects.filter(pk=lease.pk, leased_until__lt=Now()).exists():
            abandon_chunk(lease, dispatcher)
            return "abandoned"
        return "refused"
    lease = claim.lease
    items = _lease_urls(audit, lease)
    setup = crawl_setup(audit)
    writer = ChunkWriter(audit, lease, setup, on_batch=on_batch)
    writer.hold(items)
    try:
        if claim.serial:
            items = writer.drop_poison(items)
        report = run_with_db_here(lambda db: _crawl_items(items, setup, writer, db, serial=claim.serial))
    except LeaseLost:
        log.warning("audit %s chunk %s: lease reclaimed by another worker; stopping", audit_id, number)
        return "lease-lost"
    except AuditStopped:
        _release(lease)
        _finish_chunk(lease)
        return "stopped"
    with transaction.atomic():
        if not _finish_chunk(lease, unfinished=[item.id for item in report.unfinished]):
            return "lease-lost"
        # A serial retry runs one URL at a time to find a poison URL, which says
        # nothing about the site's load: the next chunk keeps the last real window.
        window = {} if claim.serial else {"current_window": report.final}
        Audit.objects.filter(pk=audit_id).update(chunks_done=F("chunks_done") + 1, **window)
        advance(audit, number, dispatcher)
    return "done"


@dataclass(frozen=True, slots=True)
class Item:
    id: int
    url: str
    url_hash: str
    kind: str
    depth: int
    in_sitemap: bool
    tries: int
    linked: bool = True


ITEM_FIELDS = ("id", "url", "url_hash", "kind", "depth", "in_sitemap", "tries", "linked")


def _lease_urls(audit: Audit, lease: ChunkLease) -> list[Item]:
    """The URLs of this chunk: the ones a previous try held, or up to CHUNK_SIZE fresh ones."""
    held = FrontierURL.objects.filter(audit=audit, chunk=lease.number, state=FrontierURL.State.LEASED)
    if not held.exists():
        _lease_fresh(audit, lease, knob("CHUNK_SIZE"))
    items = _items(held)
    ChunkLease.objects.filter(pk=lease.pk, token=lease.token).update(url_count=len(items))
    return items


def _items(rows) -> list[Item]:
    """The leased frontier ``rows`` as the window runs them: pages shallowest first, checks between."""
    return _spread_checks([Item(*row) for row in rows.order_by("depth", "id").values_list(*ITEM_FIELDS)])


def _spread_checks(items: list[Item]) -> list[Item]:
    """The pages in their order, with the checks spread evenly between them.

    A lease's checks sit a click below its pages, so in lease order they all
    came last: the window took its time over the pages, then ran through the
    checks (~10 times as fast) and was out of work before the next top-up,
    asked when a set number of items was left, could arrive. Spread out, the
    items left at any point take about as long as any others. Only pages set
    click depths (checks have no links), so their order is what must hold.
    """
    pages = [item for item in items if item.kind == Page.Kind.PAGE]
    checks = [item for item in items if item.kind != Page.Kind.PAGE]
    if not pages or not checks:
        return items
    spread: list[Item] = []
    taken = 0
    for n, page in enumerate(pages, 1):
        due = -(-n * len(checks) // len(pages))  # checks placed by the n-th page: ceil(n * checks / pages)
        spread.append(page)
        spread.extend(checks[taken:due])
        taken = due
    return spread


# A page depth cap no page meets: a top-up of checks only.
NO_PAGES = -1


# A top-up (ChunkWriter.top_up) may lease this many URLs per page it may lease,
# the rest checks: a HEAD check costs a small part of a page's fetch, parse and
# rows. On a 1,000-page audit whose last ~6,000 URLs were resource checks,
# 200-URL top-ups lasted ~110 ms each while their answers, queued behind a
# sub-batch write, took about as long: the window ran short of work for
# 1.4-1.8 s of a ~7 s crawl.
TOP_UP_URLS_PER_PAGE = 4


def _lease_fresh(audit: Audit, lease: ChunkLease, limit: int, page_depth_cap: int | None = None,
                 url_limit: int | None = None) -> list[int]:
    """Mark up to ``limit`` pending URLs as this chunk's, shallowest first; their ids.

    With ``page_depth_cap`` (a top-up, see ChunkWriter.top_up) pages deeper
    than it stay pending; resource and external checks of any depth may go.
    With ``url_limit``, up to that many URLs go, of which at most ``limit`` pages.
    """
    pending = FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING).due()
    if page_depth_cap is not None:
        pending = pending.filter(~Q(kind=Page.Kind.PAGE) | Q(depth__lte=page_depth_cap))
    budget = _page_budget(audit)
    if budget <= 0:
        # Out of pages: resources and external links of crawled pages still
        # go, and so do rescheduled pages (they hold their place in the budget).
        pending = pending.exclude(kind=Page.Kind.PAGE, reschedules=0)
    elif pending.filter(kind=Page.Kind.PAGE, linked=True).exists():
        # Pages reached through links go first, so a page that is both in
        # the sitemap and linked is crawled at its click depth; sitemap-only
        # pages (orphan candidates) wait until links have nothing more to give.
        pending = pending.exclude(kind=Page.Kind.PAGE, linked=False)
    rows = pending.order_by("depth", "id").values_list("id", "kind", "reschedules")[:max(limit, url_limit or 0)]
    ids, pages, counted = [], 0, 0
    for row_id, kind, reschedules in rows:
        if kind == Page.Kind.PAGE:
            pages += 1
            if pages > limit:  # a top-up's extra room is for checks
                continue
            if not reschedules:
                counted += 1
                if counted > budget:  # keep the page budget; resources and external links still go
                    continue
        ids.append(row_id)
    # `state=pending` in the WHERE: of two chunks racing for a row, one gets it.
    FrontierURL.objects.by_id(ids, FrontierURL.State.PENDING).update(state=FrontierURL.State.LEASED, chunk=lease.number)
    return ids


# How long an interrupted chunk waits for its crawl thread to unwind (cancelled
# tasks, closed sockets) before the exception goes on without it.
CRAWL_STOP_SECONDS = 10.0


class _CrawlStop:
    """Cancels the crawl thread's main task from another thread, even before it has started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._task: asyncio.Task | None = None
        self._cancelled = False

    def started(self) -> None:
        """Called by the crawl's main task first thing: a cancel asked for already applies now."""
        with self._lock:
            self._task = asyncio.current_task()
            if self._cancelled:
                self._task.cancel()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._task is not None:
                try:
                    self._task.get_loop().call_soon_threadsafe(self._task.cancel)
                except RuntimeError:  # the loop has closed: the crawl is over anyway
                    pass


def run_with_db_here(make_coroutine):
    """Run an async crawl in a helper thread while every database call runs on this thread.

    Django connections belong to the thread that opened them; keeping the
    writes on the caller's thread means one connection, the caller's
    transaction semantics, and no second SQLite writer competing for the lock.
    The coroutine gets ``db(fn, *args)``, an awaitable that runs ``fn`` here.
    """
    requests: queue.SimpleQueue = queue.SimpleQueue()
    outcome: dict = {}
    stop = _CrawlStop()

    async def db(fn, *args):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        requests.put((fn, args, future, loop))
        return await future

    async def crawl():
        stop.started()
        return await make_coroutine(db)

    def crawl_thread():
        try:
            outcome["value"] = crawl_loop.run(crawl())
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc
        finally:
            requests.put(None)

    thread = threading.Thread(target=crawl_thread, name="crawl-loop", daemon=True)
    with crawl_gc():  # both threads allocate hard and free by refcount (crawler.gcpolicy)
        try:
            thread.start()
            while (request := requests.get()) is not None:
                fn, args, future, loop = request
                try:
                    value = fn(*args)
                except BaseException as exc:
                    loop.call_soon_threadsafe(_settle, future, None, exc)
                else:
                    loop.call_soon_threadsafe(_settle, future, value, None)
        except BaseException:
            # Ctrl-C lands here, in the wait for the next request. Left running,
            # the crawl thread (a daemon) was still inside uvloop or lxml when
            # the interpreter shut down, and the `audit` command, having printed
            # its summary and "exit code 130", died of SIGSEGV instead.
            stop.cancel()
            with contextlib.suppress(RuntimeError):  # the thread never started
                thread.join(CRAWL_STOP_SECONDS)
            raise
        thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _settle(future: asyncio.Future, value, error) -> None:
    if future.done():  # the awaiting task was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


async def _crawl_items(items, setup: CrawlSetup, writer: ChunkWriter, db, *, serial: bool):
    deadline = time.monotonic() + knob("CHUNK_SOFT_DEADLINE")
    marker = fault_injection_marker()
    context = PageContext(setup.checks, is_internal=_internal_test(setup.scope))
    window = setup.window
    if serial:
        window = WindowPolicy(floor=1, start=1, cap=1, per_host=1, rate=window.rate,
                              crawl_delay=window.crawl_delay)

    async with Fetcher(setup.policy, setup.guard, concurrency=window.cap) as fetcher:

        async def work(item: Item) -> PageOutcome:
            if serial:
                await db(writer.mark_try, item)
            if marker and marker in item.url:
                os._exit(137)  # fault injection (tests only): die like an OOM-killed worker
            if item.kind == Page.Kind.PAGE:
                ctx = PageContext(context.settings, context.is_internal, in_sitemap=item.in_sitemap)
                return await process_page(fetcher, item.url, item.depth, ctx)
            result = await fetcher.check(item.url)
            findings = run_page_checks(result, None, context) if item.kind == Page.Kind.RESOURCE else []
            return PageOutcome(item.url, item.depth, result, None, tuple(findings), ())

        async def sink(outcomes: list[PageOutcome]) -> None:
            await db(writer.write, outcomes)

        async def refill() -> list[Item]:
            return await db(writer.top_up)

        return await run_window(
            items, work, sink, policy=window, host_of=lambda item: "",
            health_of=lambda outcome: fetch_health(outcome.result, window),
            soft_deadline=deadline, max_batch_wait=1.0,
            batch_size=1 if serial else SUB_BATCH * PAGE_WEIGHT, weight_of=None if serial else _weight,
            # A serial retry runs exactly the URLs the chunk held, to find a poison one.
            refill=None if serial else refill,
        )


def _weight(outcome: PageOutcome) -> int:
    """What a result counts toward a sub-batch: a parsed page PAGE_WEIGHT, a check 1."""
    return PAGE_WEIGHT if outcome.facts is not None else 1


def _internal_test(scope: Scope | None) -> Callable[[str], bool]:
    origin = scope.origin if scope else ""

    def is_internal(url: str) -> bool:
        try:
            return origin_of(url) == origin
        except InvalidURL:
            return False

    return is_internal


def _release(lease: ChunkLease, ids: list[int] | None = None) -> None:
    """Hand URLs this chunk holds back to the frontier (fenced by the token)."""
    with transaction.atomic():
        if not ChunkLease.objects.filter(pk=lease.pk, token=lease.token).exists():
            return
        rows = FrontierURL.objects.filter(audit_id=lease.audit_id, chunk=lease.number,
                                          state=FrontierURL.State.LEASED)
        if ids is not None:
            rows = rows.filter(id__in_array=ids)
        rows.update(state=FrontierURL.State.PENDING, chunk=None)


def _finish_chunk(lease: ChunkLease, unfinished: list[int] | None = None) -> bool:
    """Release unstarted URLs and mark the chunk done; False if we no longer own it."""
    with transaction.atomic():
        done = ChunkLease.objects.filter(pk=lease.pk, token=lease.token, state=ChunkLease.State.LEASED).update(
            state=ChunkLease.State.DONE, finished_at=Now())
        if not done:
            return False
        if unfinished:
            FrontierURL.objects.by_id(unfinished, FrontierURL.State.LEASED).filter(chunk=lease.number).update(
                state=FrontierURL.State.PENDING, chunk=None)
    return True


def abandon_chunk(lease: ChunkLease, dispatcher: Dispatcher) -> bool:
    """A chunk out of attempts: its remaining URLs are recorded as lost and the crawl goes on.

    If the start page itself is among them the audit fails (``worker_lost``):
    nothing else can be found without it.
    """
    with transaction.atomic():
        updated = ChunkLease.objects.filter(pk=lease.pk, state=ChunkLease.State.LEASED,
                                            leased_until__lt=Now()).update(
            state=ChunkLease.State.ABANDONED, token=None, finished_at=Now())
        if not updated:
            return False
        audit = Audit.objects.get(pk=lease.audit_id)
        lost = list(FrontierURL.objects.filter(audit=audit, chunk=lease.number, state=FrontierURL.State.LEASED))
        _record_lost(audit, lost)
        if any(row.depth == 0 and row.linked for row in lost) and not Page.objects.filter(
                audit=audit, depth=0, fetch_error="").exists():
            audit.fail(Audit.ErrorCode.WORKER_LOST,
                       f"The start page killed its worker {lease.attempts} times.", Audit.Phase.CRAWLING)
            return True
        advance(audit, lease.number, dispatcher)
    return True


def _record_lost(audit: Audit, rows: list[FrontierURL]) -> None:
    Page.objects.bulk_create([
        Page(audit=audit, url=row.url, url_hash=row.url_hash, kind=row.kind, depth=row.depth,
             final_url=row.url, fetch_error=FetchError.WORKER_LOST.value, fetch_error_detail=WORKER_LOST_DETAIL,
             in_sitemap=row.in_sitemap)
        for row in rows
    ], ignore_conflicts=True)
    FrontierURL.objects.filter(id__in_array=[row.id for row in rows]).update(state=FrontierURL.State.DONE)
    audit.beat(pages_failed=sum(1 for row in rows if row.kind == Page.Kind.PAGE))


def advance(audit: Audit, after: int, dispatcher: Dispatcher) -> None:
    """After chunk ``after``: schedule the next chunk, wait for rate-limited URLs, or finalize."""
    if not Audit.objects.filter(pk=audit.pk, status=Audit.Status.RUNNING).exists():
        return
    # Read before has_work: a URL that comes due in between is then seen by
    # has_work, never missed by both (which would finalize without it).
    wait = retry_wait(audit)
    if has_work(audit):
        _schedule_chunk(audit, after + 1, dispatcher)
        return
    if wait is not None:
        dispatcher.wait(audit, after, wait)
        return
    if audit.begin_finalize():
        dispatcher.finalize(audit.pk)


def has_work(audit: Audit) -> bool:
    """Whether a chunk started now would lease anything."""
    due = FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING).due()
    # Within the budget anything due will do: one row. The other question (is
    # there a resource, external link or rescheduled page, which the budget does
    # not stop?) scans past every fresh pending page, so it is asked only once
    # the budget is spent.
    if _page_budget(audit) > 0 and due.exists():
        return True
    return due.exclude(kind=Page.Kind.PAGE, reschedules=0).exists()


def retry_wait(audit: Audit) -> float | None:
    """Seconds until the first pending rate-limited URL is due (0 when one is); None when none waits."""
    first = (FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING, not_before__isnull=False)
             .annotate(db_now=Now()).order_by("not_before").values_list("not_before", "db_now").first())
    if first is None:
        return None
    not_before, now = first
    return max(0.0, (not_before - now).total_seconds())


def _page_budget(audit: Audit) -> int:
    """How many more pages the audit may lease: exact near max_pages, a lower bound far from it.

    ``pages_discovered`` grows in the same transaction as every page row it
    counts is queued (start's seeds, the writer's admissions), so it bounds the
    rows that use up the budget from above. While max_pages is a whole chunk or
    more beyond it, no lease can overrun, and the frontier is not counted: that
    count reads every page row of the audit, once per chunk, which at a
    million pages would make the crawl's bookkeeping grow with the square of
    its size.
    """
    max_pages, discovered = Audit.objects.filter(pk=audit.pk).values_list("max_pages", "pages_discovered").get()
    if max_pages - discovered >= knob("CHUNK_SIZE"):
        return max_pages - discovered
    return max_pages - _pages_counted(audit)


def _pages_counted(audit: Audit) -> int:
    """Pages that used up the page budget: fetched, being fetched, or rescheduled after a Retry-After."""
    return FrontierURL.objects.filter(audit=audit, kind=Page.Kind.PAGE).exclude(
        state=FrontierURL.State.PENDING, reschedules=0).exclude(skip_reason__gt="").count()


# --- writing a sub-batch -------------------------------------------------------------


class ChunkWriter:
    """Writes one sub-batch of results in one fenced transaction (runs in the DB thread)."""

    def __init__(self, audit: Audit, lease: ChunkLease, setup: CrawlSetup, on_batch=None,
                 kinds: dict[str, str] | None = None):
        self.audit = audit
        # url_hash -> kind of the URLs this chunk leased, known from the lease:
        # a query fewer a sub-batch (a round trip matters on PostgreSQL).
        self.kinds = kinds or {}
        # url_hash -> frontier row id of the same URLs (_close_on_postgresql).
        self.ids: dict[str, int] = {}
        self.lease = lease
        self.setup = setup
        self.on_batch = on_batch
        self.patterns = (compile_patterns(audit.patterns("include")), compile_patterns(audit.patterns("exclude")))
        self.memo = memo_for(audit)
        # Frontier facts of the open transaction, remembered once it commits.
        self._linked: list[str] = []
        self._present: list[str] = []
        # How deep top_up may lease pages: the deepest linked page of the first lease.
        self.depth_cap: int | None = None

    def hold(self, items: list[Item]) -> None:
        """Take on leased ``items``: their kinds are known from here on (a query fewer a write)."""
        self.kinds.update((item.url_hash, item.kind) for item in items)
        self.ids.update((item.url_hash, item.id) for item in items)
        if self.depth_cap is None and items:
            # Linked pages only: a resource sits a click below the page that
            # links it, and a sitemap-only page may sit anywhere, so either
            # would let top-ups reach pages a level (or many) too deep. Without
            # a linked page the chunk tops up with checks only.
            depths = [item.depth for item in items if item.kind == Page.Kind.PAGE and item.linked]
            self.depth_cap = max(depths) if depths else NO_PAGES

    def top_up(self) -> list[Item]:
        """More URLs for this chunk while its last ones run; [] when there are none to give.

        Called by the window once few of the chunk's URLs are left to start, so
        fetching goes on while the chunk's last results are written, instead of
        stopping for the end of one chunk and the start of the next (their
        writes, the lease bookkeeping and a new connection pool cost a few
        hundred milliseconds a chunk on PostgreSQL, against a few of fetching a
        URL). Each top-up leases up to CHUNK_SIZE pages, and resource or
        external checks up to TOP_UP_URLS_PER_PAGE times that many URLs in all,
        fenced like every write, so a retry of the chunk re-receives what it
        held as before. Pages no
        deeper than the chunk's first lease, because their links are what sets
        the next pages' click depth: a deeper page could be written before a
        shallower one linking the same new URL, which would then get too deep
        a depth. The chunk ends, and the next starts from the frontier, when
        nothing that shallow is pending (or at the soft deadline).

        The cap filter cannot use the frontier index's depth range, so near
        the end of a level a top-up reads the pending rows below it: fine at
        tens of thousands of pending URLs, worth an index if frontiers of
        millions are audited.
        """
        if self.depth_cap is None:
            return []
        with transaction.atomic():
            self._fence()
            if not Audit.objects.filter(pk=self.audit.pk, status=Audit.Status.RUNNING).exists():
                raise AuditStopped()
            size = knob("CHUNK_SIZE")
            ids = _lease_fresh(self.audit, self.lease, size, page_depth_cap=self.depth_cap,
                               url_limit=size * TOP_UP_URLS_PER_PAGE)
            if not ids:
                return []
            rows = FrontierURL.objects.by_id(ids, FrontierURL.State.LEASED).filter(chunk=self.lease.number)
            items = _items(rows)
            ChunkLease.objects.filter(pk=self.lease.pk).update(url_count=F("url_count") + len(items))
        self.hold(items)
        return items

    # Serial (retry) mode: a URL is marked before it is fetched; one still marked
    # on the next try is the URL that killed the worker.
    def drop_poison(self, items: list[Item]) -> list[Item]:
        poison = [item for item in items if item.tries > 0]
        if poison:
            with transaction.atomic():
                self._fence()
                _record_lost(self.audit, list(FrontierURL.objects.filter(id__in_array=[i.id for i in poison])))
        return [item for item in items if item.tries == 0]

    def mark_try(self, item: Item) -> None:
        with transaction.atomic():
            self._fence()
            FrontierURL.objects.filter(id=item.id).update(tries=F("tries") + 1)

    def _fence(self) -> None:
        ttl = timedelta(seconds=knob("LEASE_SECONDS"))
        extended = ChunkLease.objects.filter(
            pk=self.lease.pk, token=self.lease.token, state=ChunkLease.State.LEASED
        ).update(leased_until=Now() + ttl)
        if not extended:
            raise LeaseLost()

    def write(self, outcomes: list[PageOutcome]) -> None:
        self._linked, self._present = [], []
        # PostgreSQL fences, closes and reads the status in one statement at the
        # end of the transaction (_close_on_postgresql); elsewhere the fence comes first.
        postgres = connection.vendor == "postgresql"
        with transaction.atomic():
            if not postgres:
                self._fence()
            outcomes = self._reschedule_rate_limited(outcomes)
            pages = self._write_pages(outcomes)
            issues = self._write_issues(outcomes, pages)
            discovered = self._write_links(outcomes)
            hashes = [url_hash(o.url) for o in outcomes]
            crawled = sum(1 for o in outcomes if _kind_of(o, pages) == Page.Kind.PAGE)
            failed = sum(1 for o in outcomes if o.result.error is not None and _kind_of(o, pages) == Page.Kind.PAGE)
            severities = [i.severity for i in issues]
            counters = {
                "pages_crawled": crawled, "pages_failed": failed, "pages_discovered": discovered,
                "issues_critical": severities.count("critical"), "issues_warning": severities.count("warning"),
                "issues_notice": severities.count("notice"),
            }
            if postgres:
                status = self._close_on_postgresql(hashes, counters)
            else:
                ids = self._leased_ids(hashes)
                urls = (FrontierURL.objects.by_id(ids, FrontierURL.State.LEASED) if ids is not None
                        else FrontierURL.objects.filter(audit=self.audit, url_hash__in_array=hashes,
                                                        state=FrontierURL.State.LEASED))
                urls.filter(chunk=self.lease.number).update(state=FrontierURL.State.DONE)
                self.audit.beat(**counters)
        self.memo.remember(self._linked, self._present)  # committed: safe to rely on
        if self.on_batch:
            self.on_batch(outcomes, issues)
        # A cancel (or a watchdog failure) is seen here, between sub-batches:
        # within seconds, since a sub-batch is flushed at least every second.
        if not postgres:
            status = Audit.objects.filter(pk=self.audit.pk).values_list("status", flat=True).first()
        if status != Audit.Status.RUNNING:
            raise AuditStopped()

    def _close_on_postgresql(self, hashes: list[str], counters: dict[str, int]) -> str:
        """Fence, mark the URLs done, beat and read the audit's status: one round trip.

        Each round trip of the database thread waits for the GIL behind the
        busy crawl thread (benchmarks/gil_roundtrip.py), ~5 ms apiece at 1,000
        pages, and a write made about 17. Fencing at the end of the transaction
        instead of its start is as safe: a zombie's rows are rolled back with it
        (LeaseLost below), and a claim racing this statement either changed the
        token first (the fence fails) or waits for this commit.
        """
        ttl = timedelta(seconds=knob("LEASE_SECONDS"))
        quote = connection.ops.quote_name
        leases, frontier, audits = (quote(model._meta.db_table) for model in (ChunkLease, FrontierURL, Audit))
        changes = "".join(f", {quote(name)} = {quote(name)} + %s" for name, value in counters.items() if value)
        ids = self._leased_ids(hashes)
        if ids is None:
            target, key = "audit_id = %s AND url_hash = ANY(%s::text[])", [self.audit.pk, pg_array(hashes)[0]]
        else:
            target, key = "id = ANY(%s::bigint[])", [pg_array(ids)[0]]
        # `state = (SELECT %s)`: kept from the partial chunk index (FrontierQuerySet.by_id).
        sql = f"""
            WITH fence AS (
                UPDATE {leases} SET leased_until = STATEMENT_TIMESTAMP() + %s
                WHERE id = %s AND token = %s AND state = %s RETURNING id
            ), done AS (
                UPDATE {frontier} SET state = %s
                WHERE {target} AND chunk = %s AND state = (SELECT %s) AND EXISTS (SELECT 1 FROM fence)
            )
            UPDATE {audits} SET heartbeat_at = %s{changes}
            WHERE id = %s AND EXISTS (SELECT 1 FROM fence) RETURNING status
        """
        params = [
            ttl, self.lease.pk, self.lease.token, ChunkLease.State.LEASED,
            FrontierURL.State.DONE, *key, self.lease.number, FrontierURL.State.LEASED,
            timezone.now(), *[value for value in counters.values() if value], self.audit.pk,
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:
            raise LeaseLost()
        return row[0]

    def _leased_ids(self, hashes: list[str]) -> list[int] | None:
        """The frontier row ids of these URLs, from the lease (None if it did not give them all).

        The sub-batch's URLs are marked done by these ids, with no condition on
        the audit, so the primary key is the only index that fits. By audit and
        hash, PostgreSQL took the (audit, chunk) index on a new crawl's frontier
        (no statistics yet) and filtered the chunk's every row by hash, and a
        chunk that tops up holds nearly every URL of the audit (EXPLAIN ANALYZE
        on a copy of a 1,000-page audit's rows: 7,777 rows read for 74 updated,
        8.8 ms); SQLite, without statistics, planned the same index. Only the
        start page's own write, whose writer holds no lease, goes by hash.
        """
        ids = [self.ids.get(digest) for digest in hashes]
        return None if None in ids else ids

    def _reschedule_rate_limited(self, outcomes: list[PageOutcome]) -> list[PageOutcome]:
        """Put URLs the site asked us to come back to later back in the frontier; return the rest.

        A URL goes back at most MAX_RESCHEDULES times; after that it is stored
        as rate_limited like one whose Retry-After was past the cap (which the
        fetcher returns without a retry_after).
        """
        asked = {url_hash(o.url): o for o in outcomes
                 if o.result.error is FetchError.RATE_LIMITED and o.result.retry_after is not None}
        if not asked:
            return outcomes
        # External links are stored rate_limited at once (finalize reports a
        # throttled external URL as unverified): another site's throttling is
        # not worth holding the audit open for.
        ours = FrontierURL.objects.filter(audit=self.audit, chunk=self.lease.number,
                                          state=FrontierURL.State.LEASED, url_hash__in_array=list(asked)).exclude(
                                              kind=Page.Kind.EXTERNAL)
        spent = dict(ours.values_list("url_hash", "reschedules"))
        later: dict[int, list[str]] = {}
        for digest, count in spent.items():
            if count < MAX_RESCHEDULES:
                # Whole seconds, so one UPDATE serves every URL given the same wait.
                later.setdefault(math.ceil(asked[digest].result.retry_after), []).append(digest)
        for seconds, hashes in later.items():
            ours.filter(url_hash__in_array=hashes).reschedule(seconds)
        rescheduled = {digest for hashes in later.values() for digest in hashes}
        kept = []
        for o in outcomes:
            digest = url_hash(o.url)
            if digest in rescheduled:
                continue
            if digest in spent:
                detail = f"{o.result.error_detail}; still rate limited after {spent[digest]} reschedules"
                o = dataclasses.replace(o, result=dataclasses.replace(o.result, error_detail=detail))
            kept.append(o)
        return kept

    def _write_pages(self, outcomes: list[PageOutcome]) -> dict[str, tuple[int, str]]:
        hashes = [url_hash(o.url) for o in outcomes]
        kinds = self.kinds
        if not all(digest in kinds for digest in hashes):
            kinds = dict(FrontierURL.objects.filter(audit=self.audit, url_hash__in_array=hashes).values_list(
                "url_hash", "kind"))
        now = bulk.db_datetime(timezone.now())
        rows = [page_row(self.audit.pk, o, digest, kinds.get(digest, Page.Kind.PAGE), now)
                for o, digest in zip(outcomes, hashes, strict=True)]
        found = bulk.upsert(Page, PAGE_COLUMNS, rows, conflict=["audit_id", "url_hash"], update=PAGE_UPDATE_FIELDS,
                            returning=["url_hash", "id", "kind"])
        if found is None:
            found = Page.objects.filter(audit=self.audit, url_hash__in_array=hashes).values_list("url_hash", "id", "kind")
        return {digest: (pk, kind) for digest, pk, kind in found}

    def _write_issues(self, outcomes, pages) -> list[IssueRow]:
        rows = []
        for o in outcomes:
            page_id = pages.get(url_hash(o.url), (None, ""))[0]
            rows.extend(issue_row(self.audit.pk, page_id, o.url, f) for f in o.findings)
        insert_issues(rows)
        return rows

    def _write_links(self, outcomes: list[PageOutcome]) -> int:
        """Link edges for every outlink; new frontier rows for what the crawl should fetch."""
        audit, setup = self.audit, self.setup
        origin = setup.scope.origin if setup.scope else None
        audit_id = audit.pk
        edges: list[tuple] = []
        candidates: dict[str, Candidate] = {}
        blocked: dict[str, tuple[str, str]] = {}
        # Targets already in the frontier through a link: _queue would drop any
        # offer of them (FrontierMemo.settled), so most links, which point at
        # pages and resources seen before, skip the scope, depth and robots
        # tests and the Candidate as well.
        known = self.memo.linked
        # Outlinks are normalised absolute URLs (crawler.page), so a link is
        # internal when it starts with the origin and its path's slash: ~93,000
        # edges at 1,000 pages, where fast_origin cost 15 ms of this thread.
        inside = origin + "/" if origin is not None else None
        append = edges.append
        for o in outcomes:
            if o.facts is None:
                continue
            source = o.url
            page_internal = origin is not None and fast_origin(o.result.final_url or source) == origin
            source_hash = url_hash(source)
            for link in o.outlinks:
                url = link.url
                target_hash = url_hash(url)
                internal = inside is not None and url.startswith(inside)
                text = link.text
                append((audit_id, source_hash, source, target_hash, url, link.tag, clean(text, 200) if text else "",
                        link.nofollow, internal))
                if not page_internal or target_hash in candidates or target_hash in known or link.tag == "form":
                    continue
                if link.tag in PAGE_TAGS and internal:
                    if not self._crawlable(url) or o.depth + 1 > audit.max_depth:
                        continue
                    if audit.respect_robots and not setup.robots.allowed(url, setup.user_agent):
                        blocked.setdefault(target_hash, (url, o.url))
                        continue
                    candidates[target_hash] = Candidate(url, o.depth + 1, o.url, Page.Kind.PAGE)
                elif internal and link.tag in RESOURCE_TAGS:
                    if audit.respect_robots and not setup.robots.allowed(url, setup.user_agent):
                        continue
                    candidates[target_hash] = Candidate(url, o.depth + 1, o.url, Page.Kind.RESOURCE)
                elif not internal and audit.check_external and (link.tag in PAGE_TAGS or link.tag in RESOURCE_TAGS):
                    candidates[target_hash] = Candidate(url, o.depth + 1, o.url, Page.Kind.EXTERNAL)
        # A retried page replaces the edges an earlier try wrote (the fence makes
        # this transaction the only writer of these sources), so no unique key
        # is needed to keep them single. Only pages are parsed, so a resource or
        # external URL of the lease has no edges to replace: a sub-batch of
        # resource checks skips the statement.
        pages = [digest for digest in map(url_hash, (o.url for o in outcomes))
                 if self.kinds.get(digest, Page.Kind.PAGE) == Page.Kind.PAGE]
        with connection.cursor() as cursor:
            for start in range(0, len(pages), DELETE_BATCH):
                sources = pages[start:start + DELETE_BATCH]
                cursor.execute(
                    f"DELETE FROM audits_linkedge WHERE audit_id = %s AND source_hash IN "
                    f"({', '.join(['%s'] * len(sources))})", [audit_id, *sources],
                )
        bulk.append(LinkEdge, EDGE_COLUMNS, edges)
        return self._queue(candidates, blocked)

    def _crawlable(self, url: str) -> bool:
        """Include/exclude patterns, searched against the (already normalised) URL."""
        include, exclude = self.patterns
        if include and not any(p.search(url) for p in include):
            return False
        return not any(p.search(url) for p in exclude)

    def _queue(self, candidates: dict[str, Candidate], blocked: dict[str, tuple[str, str]]) -> int:
        """Queue the candidates the frontier has not seen (the dedup set is the frontier table)."""
        audit, memo = self.audit, self.memo
        candidates = {h: c for h, c in candidates.items() if not memo.settled(h, c.kind == Page.Kind.PAGE)}
        blocked = {h: v for h, v in blocked.items() if not memo.settled(h, True)}
        all_hashes = list(candidates) + list(blocked)
        existing = dict(FrontierURL.objects.filter(audit=audit, url_hash__in_array=all_hashes).values_list(
            "url_hash", "linked")) if all_hashes else {}
        # A sitemap-only URL reached by a link now gets its click depth.
        relink = [h for h, linked in existing.items()
                  if not linked and h in candidates and candidates[h].kind == Page.Kind.PAGE]
        for depth in {candidates[h].depth for h in relink}:
            hashes = [h for h in relink if candidates[h].depth == depth]
            FrontierURL.objects.filter(audit=audit, url_hash__in_array=hashes).update(linked=True, depth=depth)
            Page.objects.filter(audit=audit, url_hash__in_array=hashes, depth__gt=depth).update(depth=depth)
        # Trap checks only for URLs seen for the first time: most links point at known pages.
        fresh = []
        for digest, c in candidates.items():
            if digest in existing:
                continue
            key = ""
            if c.kind == Page.Kind.PAGE:
                if trap_reason(c.url):
                    continue
                key = _tkey(c.url)
            fresh.append((digest, c, key))
        # Trap budget per path template, counted in the database so every chunk agrees.
        keys = {key for _, c, key in fresh if key}
        stats = {
            key: [n, shallowest]
            for key, n, shallowest in FrontierURL.objects.filter(audit=audit, kind=Page.Kind.PAGE,
                                                                 template_key__in_array=keys)
            .values("template_key").annotate(n=Count("id"), shallowest=Min("depth"))
            .values_list("template_key", "n", "shallowest")
        } if keys else {}
        admitted = []
        for digest, c, key in fresh:
            if key:
                seen, shallowest = stats.setdefault(key, [0, c.depth])
                if seen >= TEMPLATE_CEILING or (seen >= TRAP_VARIANTS and c.depth - shallowest > TRAP_DEPTH_SPREAD):
                    continue
                stats[key] = [seen + 1, min(shallowest, c.depth)]
            admitted.append((audit.pk, digest, c.url, c.kind, c.depth, c.found_on, key, False,
                             c.kind == Page.Kind.PAGE, FrontierURL.State.PENDING, None, "", 0, None, 0))
        from crawler.catalogue import finding

        skipped = []
        for h, (url, found_on) in blocked.items():
            if h in existing:
                continue
            skipped.append(FrontierURL(audit=audit, url=url, url_hash=h, found_on=found_on, linked=True,
                                       state=FrontierURL.State.DONE, skip_reason=FetchError.BLOCKED_BY_ROBOTS.value))
        bulk.insert(FrontierURL, FRONTIER_COLUMNS, admitted + [frontier_values(row) for row in skipped])
        # Linked now: what was linked already, what was just relinked, the new
        # link targets and the robots-blocked rows (stored as linked).
        self._linked += [h for h, linked in existing.items() if linked] + relink
        self._linked += [row[1] for row in admitted if row[8]] + [row.url_hash for row in skipped]
        relinked = set(relink)
        self._present += [h for h, linked in existing.items() if not linked and h not in relinked]
        self._present += [row[1] for row in admitted if not row[8]]
        if skipped:
            insert_issues([
                issue_row(audit.pk, None, row.url, finding(
                    "blocked_by_robots", f"Disallowed by robots.txt; linked from {row.found_on}"))
                for row in skipped
            ])
        return sum(1 for row in admitted if row[3] == Page.Kind.PAGE)


def fast_origin(url: str) -> str:
    """The origin of an already normalised URL (scheme://host[:port]), without re-parsing it."""
    start = url.find("://")
    if start < 0:
        return ""
    end = url.find("/", start + 3)
    return url if end < 0 else url[:end]


def _kind_of(outcome: PageOutcome, pages: dict[str, tuple[int, str]]) -> str:
    return pages.get(url_hash(outcome.url), (None, Page.Kind.PAGE))[1]


PAGE_UPDATE_FIELDS = [
    "final_url", "status_code", "redirect_chain", "redirect_count", "content_type", "size_bytes", "ttfb_ms",
    "total_ms", "title", "description", "canonical", "canonical_hash", "h1_count", "word_count", "robots",
    "indexable", "content_hash", "outlinks", "fetch_error", "fetch_error_detail", "crawled_at",
]


PAGE_COLUMNS = ["audit_id", "url_hash", "url", "kind", "depth", "in_sitemap", "inlinks", *PAGE_UPDATE_FIELDS]
EDGE_COLUMNS = ["audit_id", "source_hash", "source_url", "target_hash", "target_url", "tag", "anchor_text",
                "nofollow", "internal"]
ISSUE_COLUMNS = ["audit_id", "page_id", "url", "code", "severity", "message", "target_url", "key", "review",
                 "created_at"]
# The values of a row dict in PAGE_COLUMNS order, as a tuple (C, not a generator).
_PAGE_ORDER = operator.itemgetter(*PAGE_COLUMNS)
FRONTIER_COLUMNS = ["audit_id", "url_hash", "url", "kind", "depth", "found_on", "template_key", "in_sitemap",
                    "linked", "state", "chunk", "skip_reason", "tries", "not_before", "reschedules"]


def page_values(page: Page, now) -> tuple:
    values = {"crawled_at": now, "redirect_chain": json.dumps(page.redirect_chain)}
    return tuple(values[c] if c in values else getattr(page, c) for c in PAGE_COLUMNS)


def frontier_values(row: FrontierURL) -> tuple:
    return tuple(getattr(row, c) for c in FRONTIER_COLUMNS)


def insert_issues(rows: list[IssueRow]) -> None:
    now = bulk.db_datetime(timezone.now())
    bulk.insert(Issue, ISSUE_COLUMNS, [
        (i.audit_id, i.page_id, i.url, i.code, i.severity, i.message, i.target_url, i.key, Issue.Review.OPEN, now)
        for i in rows
    ])


def page_row(audit_id: int, outcome: PageOutcome, digest: str, kind: str, now) -> tuple:
    """The PAGE_COLUMNS values of one result, ready for bulk.upsert.

    Built as plain values, not through a Page instance: Model.__init__ walks
    every field and sends two signals, which cost more than the rest of the
    row for each of the ~8 URLs a corpus page brings (the page and its
    resources). ``page_values`` still turns a Page into the same tuple.
    """
    result: FetchResult = outcome.result
    facts = outcome.facts
    robots = set()
    canonical = ""
    title = description = content_hash = ""
    h1 = words = 0
    if facts is not None:
        from crawler.parse import canonical_from_link_header, robots_directives

        robots = set(facts.robots) | set(robots_directives(result.headers.get("x-robots-tag")))
        raw = [c.url for c in facts.canonicals] or list(canonical_from_link_header(result.headers.get("link")))
        if raw:
            try:
                canonical = normalize(raw[0], base=result.final_url or outcome.url)
            except InvalidURL:
                canonical = ""
        title = facts.title or ""
        description = facts.descriptions[0] if facts.descriptions else ""
        h1, words, content_hash = facts.h1_count, facts.word_count, facts.content_hash[:32]
    indexable = bool(facts is not None and result.status == 200 and "noindex" not in robots and "none" not in robots)
    values = {
        "audit_id": audit_id, "url_hash": digest, "url": outcome.url, "kind": kind, "depth": outcome.depth,
        "in_sitemap": False, "inlinks": 0,  # both set by finalize, from the frontier and the edges
        "final_url": clean(result.final_url, 8000), "status_code": result.status,
        "redirect_chain": json.dumps([[clean(h.url, 2000), h.status, clean(h.location, 2000)]
                                      for h in result.redirects]) if result.redirects else "[]",
        "redirect_count": len(result.redirects), "content_type": clean(result.content_type, 100),
        "size_bytes": min(result.size, 2**31 - 1), "ttfb_ms": int(result.ttfb * 1000),
        "total_ms": int(result.elapsed * 1000), "title": clean(title, 1000), "description": clean(description, 2000),
        "canonical": clean(canonical, 8000), "canonical_hash": url_hash(canonical) if canonical else "",
        "h1_count": min(h1, 32767), "word_count": words, "robots": clean(",".join(sorted(robots)), 200),
        "indexable": indexable, "content_hash": content_hash, "outlinks": len(outcome.outlinks),
        "fetch_error": result.error.value if result.error else "",
        "fetch_error_detail": clean(result.error_detail, 500), "crawled_at": now,
    }
    return _PAGE_ORDER(values)


# --- resume ----------------------------------------------------------------------------


def run_resume(audit_id: int, dispatcher: Dispatcher | None = None) -> None:
    """Continue a failed or cancelled audit (already re-queued) from its frontier."""
    dispatcher = dispatcher or Dispatcher()
    audit = Audit.objects.get(pk=audit_id)
    if audit.status != Audit.Status.QUEUED:
        return
    if not audit.origin:  # it never got past start: start again
        run_start(audit_id, dispatcher)
        return
    with transaction.atomic():
        if not audit.resume_crawl():
            return
        # The dead run's leases are void; their URLs go back to the frontier.
        ChunkLease.objects.filter(audit=audit).exclude(state=ChunkLease.State.DONE).update(
            state=ChunkLease.State.ABANDONED, token=None)
        FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.LEASED).update(
            state=FrontierURL.State.PENDING, chunk=None)
        last = ChunkLease.objects.filter(audit=audit).aggregate(n=Max("number"))["n"] or 0
        advance(audit, last, dispatcher)

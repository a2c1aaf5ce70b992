"""The start of an audit: where the site really is, what robots.txt and the sitemaps say, the first page.

``run_start`` follows the start URL's redirects (each hop through the SSRF guard, none
into what robots.txt disallows), anchors the crawl on the origin it ends on, reads
robots.txt and the sitemaps, seeds the frontier and stores the start page as chunk 0,
then schedules chunk 1.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from crawler.catalogue import START_CODES, finding
from crawler.checks import PageContext
from crawler.fetch import Fetcher, FetchPolicy
from crawler.http_probe import PROBE_SECONDS, HttpProbe, probe_http_form
from crawler.login import Session, is_login_redirect
from crawler.page import PageOutcome, build_outcome, without_body
from crawler.retry import parse_retry_after
from crawler.robots import (
    CRAWL_DELAY_CAP,
    Robots,
    disallowed_on,
    fetch_robots,
    load_robots,
    robots_from_result,
)
from crawler.sitemap import MAX_SECONDS as SITEMAP_SECONDS
from crawler.sitemap import discover_sitemaps
from crawler.soft404 import PROBE_SECONDS as NOT_FOUND_SECONDS
from crawler.soft404 import fetch_not_found, probe_url
from crawler.types import FetchError, FetchResult, Finding
from crawler.urls import InvalidURL, Scope, normalize, origin_of, trap_reason, url_hash

from .. import validation
from ..dispatch import Dispatcher
from ..issue_rows import insert_issues, issue_for
from ..knobs import knob
from ..models import Audit, ChunkLease, FrontierURL, Issue, Page
from .admission import template_digest
from .bridge import run_with_db_here
from .chunk import claim, internal_test
from .db_retry import beat_missed
from .progress import advance
from .rendering import browser, render_if_needed
from .session import (
    SessionLost,
    logged_in,
    moved_problem,
    open_session,
    record_start_login,
    renewed_by_answer,
    start_login,
)
from .setup import CrawlSetup, crawl_patterns, crawl_setup, site_access
from .writer import ChunkWriter

# Start cannot reschedule (robots.txt and the start page decide whether there is
# a crawl at all), so it waits in-task as long as the fetcher's default allows.
START_RETRY_AFTER_CAP = FetchPolicy.retry_after_cap
# The start step's share of its task's time limit (Q_TIMEOUT). Each fetch has its
# own budget, but a login, robots.txt twice, the start page, the sitemaps and the
# http probe in a row could outlast the task, and django-q2 would kill its worker.
START_SHARE = 0.8
# robots.txt answering 5xx or 429 is asked again after each pause of the
# ROBOTS_RETRY_SECONDS knob, or after its Retry-After when that is longer (up to
# this): RFC 9309 2.3.1.4 lets a crawler retry before it disallows everything, and
# a deploy's minute of 503s must not fail a nightly audit.
ROBOTS_RETRY_AFTER_CAP = 120.0
# A robots.txt fetch that failed for these never reached an HTTP server.
_HOST_FAULTS = frozenset({FetchError.SSRF_BLOCKED, FetchError.DNS_FAILURE, FetchError.INVALID_URL,
                          FetchError.CONNECT_FAILED, FetchError.CONNECT_TIMEOUT, FetchError.TLS_ERROR})


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
    # Counted before the fetch: a start page that kills its worker is redelivered
    # by django-q2 without end, and this is the only count that survives the death.
    tries = settings.SITEWARD["MAX_CHUNK_ATTEMPTS"]
    if audit.count_attempt("start") > tries:
        audit.fail_step("start", tries)
        return

    try:
        start_url = normalize(audit.start_url)
    except InvalidURL as exc:
        audit.fail(Audit.ErrorCode.START_URL_INVALID, str(exc), Audit.Phase.STARTING)
        return

    try:
        setup = crawl_setup(audit)
    except SessionLost as exc:
        audit.fail(Audit.ErrorCode.LOGIN_FAILED, str(exc), Audit.Phase.STARTING)
        return
    # The fetches run beside a heartbeat: an audit the command runs in-process has no task in the
    # broker, so a start longer than the watchdog's grace would read as a start that was lost.
    budget = settings.Q_CLUSTER["timeout"] * START_SHARE
    # A validation reads the sitemaps and probes http:// only for the issues of them it re-checks.
    rechecks = validation.start_rechecks(audit) if audit.mode == Audit.Mode.VALIDATE else None
    crawled_at = validation.source_origin(audit) if audit.mode == Audit.Mode.VALIDATE else ""
    outcome = run_with_db_here(lambda db: _explore(audit, start_url, setup, budget, rechecks, crawled_at),
                               idle=functools.partial(_beat, audit), idle_every=knob("WATCHDOG_GRACE_SECONDS") / 4)
    if outcome.session is not None and not outcome.error_code:
        record_start_login(audit, outcome.session)
    if outcome.error_code:
        if outcome.robots is not None:  # robots.txt unreachable: the failure is the site's issue too
            with transaction.atomic():
                if still_starting(audit):
                    _write_site_issues(audit, outcome, setup.user_agent)
                    audit.recount()
        audit.fail(outcome.error_code, outcome.error_detail, Audit.Phase.STARTING)
        return

    with transaction.atomic():
        if not still_starting(audit):
            return
        robots = outcome.robots
        audit.record_robots(robots.status, robots.http_status, robots.body, outcome.sitemap_found)
        access = site_access(audit)
        audit.begin_crawl(outcome.origin, access.identity() if access is not None else "", outcome.not_found_hash,
                          http_unsure=outcome.http_unsure)
        scope = Scope(outcome.origin, *crawl_patterns(audit, access))
        _write_site_issues(audit, outcome, setup.user_agent)
        # Its row wins over the sitemap's below, so it carries the listing itself (sitemap_bad_url judges it).
        listed = audit.mode != Audit.Mode.VALIDATE and outcome.start_url in outcome.sitemap_urls
        seeds = [FrontierURL(audit=audit, url=outcome.start_url, url_hash=url_hash(outcome.start_url),
                             depth=0, linked=True, in_sitemap=listed, template_key=template_digest(outcome.start_url))
                 ] if outcome.pages else []  # none: a validation whose start page robots.txt now disallows
        if audit.mode == Audit.Mode.VALIDATE:
            seeds += _validation_seeds(audit, robots, setup, scope)
        for url in outcome.sitemap_urls if audit.mode != Audit.Mode.VALIDATE else ():
            if not scope.contains(url) or trap_reason(url):
                continue
            if audit.respect_robots and not robots.allowed(url, setup.user_agent):
                # Never fetched, but kept with its reason, as admission keeps a link's
                # refused target, so finalize reports the listing (sitemap_bad_url).
                seeds.append(FrontierURL(audit=audit, url=url, url_hash=url_hash(url), depth=audit.max_depth,
                                         in_sitemap=True, state=FrontierURL.State.DONE,
                                         skip_reason=FetchError.BLOCKED_BY_ROBOTS.value))
                continue
            # Sitemap-only URLs queue behind everything reached by links (depth =
            # max_depth); a link that reaches one later gives it its click depth.
            seeds.append(FrontierURL(audit=audit, url=url, url_hash=url_hash(url), depth=audit.max_depth,
                                     in_sitemap=True, template_key=template_digest(url)))
        # A typed start URL that redirects is a page row of its own (outcome.pages),
        # so it gets a frontier row too: the page budget counts frontier rows, and
        # without one a max of 20 pages stored 21. It also keeps a later link to
        # it from queueing a second fetch of the same URL.
        typed = [o.url for o in outcome.pages if o.url != outcome.start_url]
        seeds += [FrontierURL(audit=audit, url=url, url_hash=url_hash(url), depth=0, linked=True,
                              template_key=template_digest(url)) for url in typed]
        FrontierURL.objects.bulk_create(seeds, ignore_conflicts=True, batch_size=1000)
        # The start page goes through the ordinary fenced writer as "chunk 0".
        FrontierURL.objects.filter(audit=audit, url_hash__in=[url_hash(o.url) for o in outcome.pages]).hold_for_start()
        discovered = FrontierURL.objects.filter(audit=audit, kind=Page.Kind.PAGE, skip_reason="").count()
        audit.beat(pages_discovered=discovered)
        ChunkLease.objects.get_or_create(audit=audit, number=0, defaults={"created_at": Now()})
        lease = claim(audit.pk, 0)
        audit.refresh_from_db()
        writer = ChunkWriter(audit, lease, crawl_setup(audit), on_batch=on_batch)
        writer.write([without_body(o) for o in outcome.pages])
        lease.finish()
        landing = outcome.pages[-1].result if outcome.pages else None
        # A validation re-checks its own URLs: a front page down now is one verdict among them, not the end.
        if audit.mode != Audit.Mode.VALIDATE and landing is not None and _front_door_down(landing):
            # Retries are spent and the site's front door is down (a 5xx, a 429, a body that never
            # came whole): say so rather than "complete" an audit of one error page. The page row stays.
            failure = f": {landing.error.label.lower()}" if landing.error is not None else ""
            audit.fail(Audit.ErrorCode.SITE_UNAVAILABLE,
                       f"The start page {landing.final_url} answered {landing.status}{failure} "
                       f"after {landing.attempts} attempt{'s' if landing.attempts != 1 else ''}."
                       + (" The site asks for fewer requests: lower the concurrency or set a rate limit."
                          if landing.status == 429 else ""),
                       Audit.Phase.STARTING)
            return
        advance(audit, 0, dispatcher)


# An answer whose body never came whole: the start page gave nothing to crawl from. A redirect
# loop or a refused hop is the site's own answer, reported as an issue of the one page it stored.
BODY_NEVER_WHOLE = frozenset({FetchError.INCOMPLETE_BODY, FetchError.DEADLINE_EXCEEDED, FetchError.READ_TIMEOUT,
                              FetchError.PROTOCOL_ERROR, FetchError.RATE_LIMITED})


def _front_door_down(landing: FetchResult) -> bool:
    """A start page that answered but gave nothing to crawl from: a 5xx, a 429, or a body that never
    came whole (cut short, dripped past the deadline; a page too large to read is no error by now)."""
    return (landing.status or 0) >= 500 or landing.status == 429 or landing.error in BODY_NEVER_WHOLE


def _validation_seeds(audit: Audit, robots: Robots, setup: CrawlSetup, scope: Scope) -> list[FrontierURL]:
    """A validation's whole frontier: what carried its source's issues, as robots.txt and the scope allow now.

    A URL robots.txt now refuses is not fetched, nor one of the site's outside
    the crawl now, as admission would judge it: a page outside the scope
    (another origin after a move, an excluded path, a private site's logout
    link), a resource on another origin or at the logout URL. Their issues end unknown.
    """
    source = Audit.objects.filter(pk=audit.source_id).first()
    if source is None:
        return []
    return [FrontierURL(audit=audit, url=t.url, url_hash=url_hash(t.url), depth=t.depth, kind=t.kind, linked=True,
                        template_key=template_digest(t.url) if t.kind == Page.Kind.PAGE else "")
            for t in validation.targets(source)
            if t.kind == Page.Kind.EXTERNAL
            or (_still_ours(t, setup, scope) and (not audit.respect_robots or robots.allowed(t.url, setup.user_agent)))]


def _still_ours(target: validation.Target, setup: CrawlSetup, scope: Scope) -> bool:
    """Whether the crawl would fetch ``target`` now: a page in the scope, a resource of the origin and no logout."""
    if target.kind == Page.Kind.PAGE:
        return scope.contains(target.url)
    return target.url.startswith(scope.origin + "/") and not setup.is_logout(target.url)


@dataclass
class StartOutcome:
    start_url: str = ""
    origin: str = ""
    robots: Robots | None = None
    sitemap_urls: tuple[str, ...] = ()
    sitemap_found: bool | None = None
    sitemap_problems: list[tuple[str, str]] = field(default_factory=list)  # (url, problem)
    sitemap_notes: tuple[str, ...] = ()  # where the walk stopped at a limit of its own
    not_found_hash: str = ""  # what the site answers a URL that cannot exist with (crawler.soft404)
    http_unsure: str = ""  # why the http:// probe gave no verdict (crawler.http_probe.HttpProbe)
    pages: list[PageOutcome] = field(default_factory=list)  # the start page, fetched once here
    session: Session | None = None  # a login's, for every chunk to use
    error_code: str = ""
    error_detail: str = ""


def _beat(audit: Audit) -> None:
    """The start's heartbeat, every quarter of the watchdog's grace."""
    try:
        audit.beat()
    except Exception as exc:
        beat_missed(exc, f"audit {audit.pk} start")


async def _explore(audit: Audit, start_url: str, setup: CrawlSetup, budget: float,
                   rechecks: frozenset[str] | None = None, crawled_at: str = "") -> StartOutcome:
    """Fetch the start page, robots.txt and the sitemaps, and probe the http:// form: no database.

    ``crawled_at``: a validation's source audit's origin, where it anchors when its start page gives no answer.

    Within ``budget`` seconds: past it, a start still waiting on the login,
    robots.txt or the start page fails as ``timeout``; the sitemaps and the
    probe get what is left (``_read_site``).
    """
    ends = asyncio.get_running_loop().time() + budget
    policy = dataclasses.replace(setup.policy, retry_after_cap=START_RETRY_AFTER_CAP, reschedule_cap=0.0)
    async with Fetcher(policy, setup.guard, concurrency=4, credentials=setup.credentials,
                       avoid=setup.avoid) as fetcher:
        try:
            async with asyncio.timeout_at(ends):
                found = await _front_door(audit, start_url, setup, fetcher, ends, crawled_at)
        except TimeoutError:
            return StartOutcome(
                error_code=Audit.ErrorCode.TIMEOUT,
                error_detail=f"The site's front door (its login, robots.txt and start page) took longer than "
                             f"{budget:.0f} s to answer, the start step's share of the task time limit (Q_TIMEOUT).")
        if isinstance(found, StartOutcome):
            return found
        outcome = await _read_site(start_url, setup, fetcher, *found, ends, rechecks=rechecks)
        if outcome.session is not None and fetcher.credentials is not None:
            # The session as the start's own fetches left it: a sliding session renewed its ticket on them.
            session = dataclasses.replace(outcome.session, cookies=dict(fetcher.credentials.session))
            outcome = dataclasses.replace(outcome, session=session)
        return outcome


async def _front_door(audit: Audit, start_url: str, setup: CrawlSetup, fetcher: Fetcher,
                      ends: float, crawled_at: str = "") -> StartOutcome | tuple[FetchResult, str, Robots, Session | None]:
    """The login, robots.txt and the start page: (the start page's answer, where it landed, robots, session),
    or the failure that ends the audit."""
    session = None
    if setup.login is not None:
        # Logged in before anything else, so robots.txt, the sitemaps and the
        # start page are read as a member sees them.
        fetcher.credentials = start_login(fetcher.credentials)
        try:
            session = await open_session(fetcher, setup.login)
            fetcher.credentials = logged_in(fetcher.credentials, setup.login, session.cookies)
        except SessionLost as exc:
            return StartOutcome(error_code=Audit.ErrorCode.LOGIN_FAILED, error_detail=str(exc))
    # robots.txt before the start page: an unreachable one disallows the start page
    # too (RFC 9309 2.3.1.4). A host that cannot be reached at all is left to the
    # start page's fetch, whose outcome names it (start_url_unresolvable, ssrf_blocked...).
    typed_origin, typed_robots, read_at = origin_of(start_url), None, set()
    if audit.respect_robots:
        fetched, asked = await _read_robots(fetcher, typed_origin, ends)
        typed_robots = robots_from_result(fetched)
        read_at = _robots_read_at(fetched, typed_origin)
        if typed_robots.status == "unavailable" and not (fetched.status is None and fetched.error in _HOST_FAULTS):
            return _robots_unreachable(typed_origin, typed_robots, asked)
        # (An unavailable file here is a host fault: the start page's fetch names it.)
        if typed_robots.status != "unavailable" and not typed_robots.allowed(start_url, setup.user_agent):
            return _start_blocked(audit, start_url, setup.user_agent, typed_origin, typed_robots, session)
    first = await _start_page(fetcher, start_url, typed_robots, read_at, setup.user_agent)
    if setup.login is not None and is_login_redirect(first, setup.login.url):
        return StartOutcome(error_code=Audit.ErrorCode.LOGIN_FAILED,
                            error_detail=f"{start_url} still sends the crawler to the login page after logging in.")
    fetcher.credentials = renewed_by_answer(fetcher.credentials, first)
    if first.error is not None and first.status is None:
        code = {
            FetchError.SSRF_BLOCKED: Audit.ErrorCode.SSRF_BLOCKED,
            FetchError.DNS_FAILURE: Audit.ErrorCode.START_URL_UNRESOLVABLE,
            FetchError.INVALID_URL: Audit.ErrorCode.START_URL_INVALID,
        }.get(first.error, Audit.ErrorCode.START_URL_UNREACHABLE)
        if audit.mode == Audit.Mode.VALIDATE and code == Audit.ErrorCode.START_URL_UNREACHABLE:
            # Its URLs are judged where the re-checked audit crawled, as then (apex -> www).
            anchor = crawled_at or typed_origin
            if anchor == typed_origin and typed_robots is not None:
                robots = typed_robots
            elif audit.respect_robots:
                robots = robots_from_result((await _read_robots(fetcher, anchor, ends))[0])
            else:
                robots = await load_robots(fetcher, anchor, ignore=True)
            if robots.status != "unavailable":
                return _start_unanswered(start_url, first, setup, anchor, robots, session)
        return StartOutcome(error_code=code, error_detail=f"{first.error.label}: {first.error_detail}".strip(": "))
    # Anchor the crawl on where the start URL really lives (apex -> www,
    # http -> https), so a host-changing redirect doesn't end the crawl. A
    # private site's access stays on the typed origin: there it is a failure.
    final = normalize(first.final_url or start_url)
    origin = origin_of(final)
    if setup.credentials is not None or setup.login is not None:
        if problem := moved_problem(start_url, origin):
            return StartOutcome(error_code=Audit.ErrorCode.LOGIN_FAILED, error_detail=problem)
    robots, asked = typed_robots, 1
    if robots is None or robots.status == "unavailable" or origin not in read_at:
        if audit.respect_robots:  # the origin the start URL lands on: asked again after a 5xx, as the typed one
            fetched, asked = await _read_robots(fetcher, origin, ends)
            robots = robots_from_result(fetched)
        else:
            robots = await load_robots(fetcher, origin, ignore=True)
    if robots.status == "unavailable":
        return _robots_unreachable(origin, robots, asked)
    if audit.respect_robots and not robots.allowed(final, setup.user_agent):
        return _start_blocked(audit, final, setup.user_agent, origin, robots, session)
    return first, final, robots, session


async def _start_page(fetcher: Fetcher, start_url: str, robots: Robots | None, read_at: set[str],
                      user_agent: str) -> FetchResult:
    """The start page, its redirects kept out of what ``robots`` disallows on the origins it was read for.

    A hop there is not followed: the redirect is the answer, its final URL the
    refused one, which ``_front_door`` then finds disallowed (start_blocked_by_robots).
    An origin whose robots.txt is not read yet is judged once the page has landed.
    """
    if robots is None or robots.status == "unavailable":
        return await fetcher.fetch(start_url)
    plain = fetcher.avoid  # a private site's logout
    refuse = functools.partial(disallowed_on, robots, frozenset(read_at), user_agent)
    fetcher.avoid = refuse if plain is None else lambda url: plain(url) or refuse(url)
    try:
        return await fetcher.fetch(start_url)
    finally:
        fetcher.avoid = plain  # the sitemaps and the http probe are no pages of the crawl


async def _read_site(start_url: str, setup: CrawlSetup, fetcher: Fetcher, first: FetchResult, final: str,
                     robots: Robots, session: Session | None, ends: float, *,
                     rechecks: frozenset[str] | None) -> StartOutcome:
    """The sitemaps and the probes, in the time left before ``ends``; then the start page's outcome.

    A whole crawl (``rechecks`` None): the start page's checks know whether the sitemap lists
    it, as any page's do, and the site's "not found" page is probed. A validation reads the
    sitemaps and probes the http:// form only when it re-checks an issue of theirs (SITE_READ_CODES).
    """
    whole_site = rechecks is None
    # Both or neither: whether their issues were judged is one flag (the sitemaps read, audits.diff).
    site_read = whole_site or bool(rechecks)
    origin = origin_of(final)
    left = max(0.0, ends - asyncio.get_running_loop().time())
    report = None
    if site_read:
        report = await discover_sitemaps(fetcher, origin, robots.sitemaps, budget=min(SITEMAP_SECONDS, left),
                                         never=setup.is_logout if setup.logout else None)
    # http_not_redirected: does the http:// form of an https start page still serve it?
    left = max(0.0, ends - asyncio.get_running_loop().time())
    plain_http = HttpProbe()
    if site_read:  # without an answer, no verdict: an earlier audit's issue is unknown, not fixed (audits.diff)
        plain_http = (await probe_http_form(fetcher, final, budget=min(PROBE_SECONDS, left)) if left else
                      HttpProbe(unsure="the start step's time ran out before the http:// form was probed"))
    probe, missing = None, probe_url(origin)
    left = max(0.0, ends - asyncio.get_running_loop().time())
    if whole_site and left and robots.allowed(missing, setup.user_agent):
        probe = await fetch_not_found(fetcher, missing, budget=min(NOT_FOUND_SECONDS, left))
    # The start page was fetched above; record it instead of fetching it again.
    # A typed URL that redirects is its own row (with its chain), as any
    # redirecting URL is; the page it lands on is the crawl's depth-0 page.
    ctx = PageContext(setup.checks, is_internal=internal_test(Scope(origin)))
    pages = []
    if final != start_url:
        pages.append(build_outcome(first, start_url, 0, ctx))  # a redirect: its one edge is to ``final``
        first = dataclasses.replace(first, url=final, redirects=())
    page_ctx = dataclasses.replace(ctx, in_sitemap=whole_site and final in frozenset(report.urls))
    pages.append(build_outcome(first, final, 0, page_ctx))
    unknown = build_outcome(probe, missing, 0, ctx) if probe is not None else None
    if setup.render != "none":
        # A rendered audit's start page too: an app shell's links exist only once it runs.
        # With the login's session, which the setup (made before the login) lacks. The
        # "not found" page as well: an app's shell shows it only once its script runs.
        here = dataclasses.replace(setup, robots=robots, scope=Scope(origin, setup.include, setup.exclude),
                                   credentials=fetcher.credentials)
        async with browser(here) as renderer:
            pages[-1] = await render_if_needed(renderer, pages[-1], here, page_ctx)
            if unknown is not None and asyncio.get_running_loop().time() < ends:  # the start step's time
                unknown = await render_if_needed(renderer, unknown, here, ctx)
            else:
                unknown = None  # unrendered, its hash is no rendered page's
    not_found = unknown.facts.content_hash if unknown is not None and unknown.facts is not None else ""
    if pages[-1].facts is not None and pages[-1].facts.content_hash == not_found:
        not_found = ""  # unknown URLs get the start page (a catch-all, an app's shell): no "not found" page to match
    if plain_http.finding is not None:  # after rendering, whose checks replace the page's findings
        pages[-1] = dataclasses.replace(pages[-1], findings=(*pages[-1].findings, plain_http.finding))
    # Sitemaps not read: their issues are unknown (audits.diff), and none is new.
    sitemaps = {} if report is None else {
        "sitemap_urls": tuple(report.urls), "sitemap_found": report.found, "sitemap_notes": report.problems,
        "sitemap_problems": [(f.url, f.problem) for f in report.files if f.problem]}
    return StartOutcome(start_url=final, origin=origin, robots=robots, pages=pages, session=session,
                        not_found_hash=not_found, http_unsure=plain_http.unsure, **sitemaps)


def _robots_read_at(fetched: FetchResult, typed_origin: str) -> set[str]:
    """The origins whose robots.txt ``fetched`` (the typed origin's) was: that one, and the one its redirects
    reached at its own /robots.txt (http -> https, apex -> www). Sent anywhere else, as to a homepage by
    nginx's ``return 301 https://www.example.com;``, it was not that origin's file, which is read on its own."""
    try:
        at_file = urlsplit(fetched.final_url or "").path == "/robots.txt"
        landed = origin_of(fetched.final_url) if at_file else typed_origin
    except ValueError:  # InvalidURL too: a Location no parser takes, where no file was read
        landed = typed_origin
    return {typed_origin, landed}


async def _read_robots(fetcher: Fetcher, origin: str, ends: float) -> tuple[FetchResult, int]:
    """The origin's robots.txt and how many times it was asked: again after a 5xx or 429 answer
    (a timeout is not asked again: the next try would hang as long), while the start's time allows."""
    loop = asyncio.get_running_loop()
    pauses = tuple(knob("ROBOTS_RETRY_SECONDS"))
    for asked, pause in enumerate((*pauses, None), start=1):
        fetched = await fetch_robots(fetcher, origin)
        if pause is None or fetched.status is None or not (fetched.status == 429 or fetched.status >= 500):
            return fetched, asked
        asked_for = parse_retry_after(fetched.headers.get("retry-after"), time.time(), fetched.headers.get("date"))
        pause = max(pause, min(asked_for or 0.0, ROBOTS_RETRY_AFTER_CAP))
        # Room for the next ask and the start page after it, each up to a whole fetch's budget.
        if loop.time() + pause + 2 * fetcher.policy.total_budget > ends:
            return fetched, asked
        await asyncio.sleep(pause)
    raise AssertionError("unreachable: the last pass returns")


def _robots_unreachable(origin: str, robots: Robots, asked: int = 1) -> StartOutcome:
    tries = f" (asked {asked} times)" if asked > 1 else ""
    return StartOutcome(
        origin=origin, robots=robots,
        error_code=Audit.ErrorCode.ROBOTS_UNREACHABLE,
        error_detail=f"{origin}/robots.txt: {robots.detail}{tries} Search engines treat this as "
                     "'disallow everything', so Siteward crawls nothing (RFC 9309). Fix robots.txt "
                     "or untick 'respect robots.txt' to audit a site you own.",
    )


def _start_unanswered(start_url: str, first: FetchResult, setup: CrawlSetup, origin: str, robots: Robots,
                      session: Session | None) -> StartOutcome:
    """A validation's start page that gave no answer (a timeout, a refused connection): one verdict
    among its URLs, as a 5xx is. Its row records the failure; the sitemaps are not read."""
    url = normalize(start_url)
    page = build_outcome(first, url, 0, PageContext(setup.checks, is_internal=internal_test(Scope(origin))))
    return StartOutcome(start_url=url, origin=origin, robots=robots, session=session, pages=[page])


def _start_blocked(audit: Audit, url: str, user_agent: str, origin: str, robots: Robots,
                   session: Session | None) -> StartOutcome:
    """A start URL robots.txt disallows: the end of a crawl. A validation re-checks its own URLs without it
    (no start page row: its source's issues on it are unknown)."""
    if audit.mode == Audit.Mode.VALIDATE:
        return StartOutcome(start_url=url, origin=origin, robots=robots, session=session)
    return StartOutcome(
        error_code=Audit.ErrorCode.START_BLOCKED_BY_ROBOTS,
        error_detail=f"robots.txt disallows {url} for the user agent {user_agent!r}, so Siteward crawls "
                     "nothing. Allow it in robots.txt, or untick 'respect robots.txt' to audit a site you own.",
    )


def still_starting(audit: Audit) -> bool:
    return Audit.objects.filter(pk=audit.pk, status=Audit.Status.RUNNING, phase=Audit.Phase.STARTING).exists()


def _write_site_issues(audit: Audit, outcome: StartOutcome, user_agent: str) -> None:
    """Site-level findings from start: robots.txt and sitemap problems.

    They replace those of a start that failed before (robots.txt unreachable,
    then the audit resumed): the site may have mended since.
    """
    Issue.objects.filter(audit=audit, page__isnull=True, code__in=START_CODES).delete()
    robots_url = f"{outcome.origin}/robots.txt"
    found: list[tuple[str, Finding]] = []
    robots = outcome.robots
    # An audit that ignores robots.txt still reports what search engines make of the file.
    status = robots.found or robots.status
    if status == "missing":
        found.append((robots_url, finding(
            "robots_txt_missing", f"robots.txt answered {robots.http_status}; crawlers may fetch everything.")))
    elif status == "unavailable":
        answer = f"answered {robots.http_status}" if robots.http_status is not None else "could not be fetched"
        found.append((robots_url, finding(
            "robots_txt_unavailable", f"robots.txt {answer}; search engines treat that as 'disallow everything'.")))
    asked = robots.crawl_delay(user_agent, cap=math.inf)
    if audit.respect_robots and asked is not None and asked > CRAWL_DELAY_CAP:
        found.append((robots_url, finding(
            "crawl_delay_capped", f"robots.txt asks for a Crawl-delay of {asked:,g} s; this audit waited "
                                  f"{CRAWL_DELAY_CAP:g} s between requests instead.")))
    if outcome.sitemap_found is False:  # None: never looked for (robots.txt ended the start)
        found.append((f"{outcome.origin}/sitemap.xml", finding(
            "sitemap_missing", "No Sitemap: line in robots.txt and nothing at /sitemap.xml.")))
    if outcome.sitemap_notes:
        found.append((f"{outcome.origin}/sitemap.xml", finding(
            "sitemaps_partly_read", "Sitemaps read in part: " + "; ".join(outcome.sitemap_notes) + ".")))
    for url, problem in outcome.sitemap_problems:
        found.append((url, finding("sitemap_invalid", problem)))
    insert_issues([issue_for(audit.pk, None, url, f) for url, f in found])

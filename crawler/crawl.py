"""An in-memory breadth-first crawl of one site: the library end to end, no database.

Used by tests and by the library benchmark; the Django side runs the same
pieces (fetcher, robots, sitemaps, window, page pipeline) over its own
frontier tables instead.

1. robots.txt of the start URL's origin is read first: when it disallows the
   start URL, or cannot be read (RFC 9309: assume complete disallow), no page
   is requested at all.
2. The start URL is fetched with its redirects followed, except into what the
   first robots.txt disallows on its origin; the crawl is anchored on the origin
   it ends on (whose robots.txt is read too if that is another origin), and that
   fetch is the depth-0 page, so the start is not fetched twice. Then the
   sitemaps (robots.txt ``Sitemap:`` lines, else ``/sitemap.xml``).
3. Pages are crawled a depth level at a time through the rolling window. A URL
   is deduplicated when it is first seen, so its depth is its true click depth;
   before it is queued it must be in scope, pass the trap guard, be allowed by
   robots.txt, be within ``max_depth`` and fit in ``max_pages``. A page's
   redirect into a disallowed path is not followed: where it points is counted
   as blocked, as a link there is.
4. When links lead nowhere new, sitemap URLs never reached through links (the
   orphans) are crawled as new seeds at depth 0, links from them continuing
   the same way.
5. External links are checked once per distinct URL (HEAD, then GET on
   405/501) when ``check_external`` is on.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from urllib.parse import urlsplit

from crawler.checks import CheckSettings, PageContext
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.page import PAGE_TAGS, REDIRECT_TAG, PageOutcome, build_outcome, process_page
from crawler.robots import Robots, disallowed_on, load_robots, refused_landing
from crawler.sitemap import SitemapReport, discover_sitemaps
from crawler.types import FetchResult, is_unverified
from crawler.urls import (
    TRAP_VARIANTS,
    InvalidURL,
    Scope,
    TrapGuard,
    normalize,
    origin_of,
    url_hash,
)
from crawler.window import WindowPolicy, fetch_health, run_window

# How many skipped URLs of each kind the report lists (the counts are exact).
_LISTED = 1000
# trap_reason's length limit, checked before a URL is hashed or kept.
_MAX_URL = 2048
# At most this many checks run at once against one external host.
_EXTERNAL_PER_HOST = 2


@dataclass(frozen=True)
class CrawlLimits:
    max_pages: int = 500
    max_depth: int = 10
    concurrency: int = 16
    rate: float | None = None  # requests per second per host
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    respect_robots: bool = True
    check_external: bool = True
    allow_private: bool = False
    user_agent: str = FetchPolicy.user_agent
    trap_variants: int = TRAP_VARIANTS  # URLs per path template before its depth spread counts
    time_budget: float | None = None  # seconds; after it nothing new starts
    max_external: int = 5000  # distinct external URLs checked at most


@dataclass(frozen=True)
class CrawlReport:
    """Counters and the few lists a caller asserts on; pages go to ``on_page``."""

    pages: int  # URLs fetched as pages (any outcome)
    origin: str
    robots: Robots
    sitemap: SitemapReport
    start_url: str = ""
    status_counts: dict[str, int] = field(default_factory=dict)  # "200", "404", "read_timeout"...
    max_depth_reached: int = 0
    blocked_by_robots: tuple[str, ...] = ()  # the first 1000
    blocked_count: int = 0
    trapped: tuple[tuple[str, str], ...] = ()  # (url, reason)
    skipped_depth: int = 0
    skipped_budget: int = 0
    out_of_scope: int = 0  # same-origin links excluded by include/exclude patterns
    invalid_links: int = 0
    external: dict[str, FetchResult] = field(default_factory=dict)
    external_broken: tuple[str, ...] = ()
    external_unverified: tuple[str, ...] = ()
    external_skipped: int = 0
    unfinished: int = 0  # queued URLs never started because the time budget ran out
    elapsed: float = 0.0
    window_peak: int = 0
    # Why the crawl ended early: "", "robots_unavailable", "start_blocked_by_robots",
    # "start_unreachable" or "time_budget".
    stopped: str = ""


class _Frontier:
    """The crawl's memory: what was seen, what comes next, and the counters."""

    def __init__(self, limits: CrawlLimits, scope: Scope, robots: Robots) -> None:
        self.limits = limits
        self.scope = scope
        self.robots = robots
        self.origin = scope.origin
        self.traps = TrapGuard(limits.trap_variants)
        self.seen: set[str] = set()
        self.queued = 0  # pages fetched or waiting to be
        self.next_level: list[str] = []
        self.blocked: list[str] = []
        self.blocked_count = 0
        self.trapped: list[tuple[str, str]] = []
        self.skipped_depth = 0
        self.skipped_budget = 0
        self.out_of_scope = 0
        self.external: dict[str, None] = {}
        self.external_skipped = 0

    def admit(self, url: str, depth: int) -> bool:
        """Queue ``url`` for ``depth`` if it passes every gate; first sighting decides.

        ``seen`` holds fixed-size digests, and once the page budget is spent a
        new URL is only counted: a page of 2,000 distinct 4 KB links must cost
        neither 8 MB of kept URLs nor 2,000 robots.txt matches.
        """
        if len(url) > _MAX_URL:
            # The cheapest trap check first: such a URL is never hashed or kept.
            if len(self.trapped) < _LISTED:
                reason = f"URL is {len(url)} characters long (limit {_MAX_URL})"
                self.trapped.append((url[:_MAX_URL], reason))
            return False
        key = url_hash(url)
        if key in self.seen:
            return False
        if self.queued >= self.limits.max_pages:
            self.skipped_budget += 1
            return False
        self.seen.add(key)
        if not self.scope.contains(url):
            self.out_of_scope += 1
            return False
        if depth > self.limits.max_depth:
            self.skipped_depth += 1
            return False
        reason = self.traps.check(url, depth)
        if reason:
            if len(self.trapped) < _LISTED:
                self.trapped.append((url, reason))
            return False
        if not self.robots.allowed(url, self.limits.user_agent):
            self.blocked_count += 1
            if len(self.blocked) < _LISTED:
                self.blocked.append(url)
            return False
        self.queued += 1
        self.next_level.append(url)
        return True

    def refuses(self, url: str) -> bool:
        """Whether robots.txt disallows ``url`` of the crawl's origin: what a page's redirect may not lead to."""
        return disallowed_on(self.robots, (self.origin,), self.limits.user_agent, url)

    def follow(self, outcome: PageOutcome) -> None:
        """Take the links of a crawled page: internal pages to the next level,
        external targets to the check list."""
        landing = refused_landing(outcome.result, self.refuses)
        if landing is not None:
            # A redirect the Fetcher did not follow: where it points is blocked, as a link there would be.
            self.admit(landing, outcome.depth)
        depth = outcome.depth + 1
        for link in outcome.outlinks:
            url = link.url
            if url.startswith(self.origin) and url[len(self.origin) : len(self.origin) + 1] in (
                "/",
                "",
            ):
                # Other tags (img, script, stylesheet...) are resources, which
                # this crawl only checks when they are external.
                if link.tag in PAGE_TAGS:
                    # Where a redirect lands is no click further: the depth limit
                    # lets it through, though it is fetched with the next level.
                    self.admit(url, outcome.depth if link.tag == REDIRECT_TAG else depth)
            elif link.tag != REDIRECT_TAG and self.limits.check_external and url not in self.external:
                # (A redirect's landing elsewhere was already fetched, through the redirect.)
                if len(self.external) < self.limits.max_external:
                    self.external[url] = None
                else:
                    self.external_skipped += 1


async def crawl_site(
    start_url: str,
    limits: CrawlLimits,
    *,
    on_page: Callable[[PageOutcome], None] | None = None,
    guard: AddressGuard | None = None,
    policy: FetchPolicy | None = None,
    settings: CheckSettings | None = None,
) -> CrawlReport:
    """Crawl the site at ``start_url`` breadth-first; see the module doc for the steps."""
    began = time.monotonic()
    deadline = began + limits.time_budget if limits.time_budget is not None else None
    policy = policy or FetchPolicy(user_agent=limits.user_agent)
    guard = guard or AddressGuard(allow_private=limits.allow_private)
    settings = settings or CheckSettings()
    statuses: Counter[str] = Counter()
    pages = 0
    invalid_links = 0
    max_depth_reached = 0
    unfinished = 0
    window_peak = 0
    stopped = ""

    async with Fetcher(policy, guard, concurrency=limits.concurrency) as fetcher:
        try:
            start = normalize(start_url)
        except InvalidURL as exc:
            raise ValueError(f"start URL refused: {exc}") from None
        agent = limits.user_agent
        ignore = not limits.respect_robots

        # 1. robots.txt of the start URL's origin comes first, so a site that
        # disallows everything, or whose robots.txt cannot be read (RFC 9309:
        # assume complete disallow), gets no page request at all.
        origin = origin_of(start)
        robots = await load_robots(fetcher, origin, ignore=ignore)
        first: FetchResult | None = None
        if robots.status == "unavailable":
            stopped = "robots_unavailable"
        elif not robots.allowed(start, agent):
            stopped = "start_blocked_by_robots"
        else:
            # 2. The start URL with its redirects, none into what this robots.txt
            # disallows (then the start is blocked, below): the crawl is anchored
            # on the origin it ends on, whose robots.txt then applies.
            fetcher.avoid = None if ignore else partial(disallowed_on, robots, (origin,), agent)
            first = await fetcher.fetch(start)
            fetcher.avoid = None
            if first.error is not None and first.status is None:
                stopped = "start_unreachable"
            try:
                final_origin = origin_of(first.final_url)
            except InvalidURL:
                final_origin = origin
            if final_origin != origin:
                origin = final_origin
                robots = await load_robots(fetcher, origin, ignore=ignore)
        scope = Scope(origin, limits.include, limits.exclude)

        # 3. Sitemaps of that origin, when there is a site to read.
        if stopped or robots.status == "unavailable":
            sitemap = SitemapReport((), (), False)
        else:
            sitemap = await discover_sitemaps(fetcher, origin, robots.sitemaps)
        in_sitemap = frozenset(sitemap.urls)
        base_ctx = PageContext(settings=settings, is_internal=scope.contains)
        in_sitemap_ctx = replace(base_ctx, in_sitemap=True)

        def ctx_for(url: str) -> PageContext:
            return in_sitemap_ctx if url in in_sitemap else base_ctx

        frontier = _Frontier(limits, scope, robots)
        delay = robots.crawl_delay(limits.user_agent) or 0.0
        concurrency = max(1, limits.concurrency)
        window_policy = WindowPolicy(
            floor=min(2, concurrency),
            start=min(4, concurrency),
            cap=concurrency,
            per_host=concurrency,
            rate=limits.rate,
            crawl_delay=delay,
        )

        def record(outcome: PageOutcome) -> None:
            nonlocal pages, invalid_links, max_depth_reached
            pages += 1
            invalid_links += outcome.invalid_links
            result = outcome.result
            statuses[str(result.error) if result.error else str(result.status)] += 1
            max_depth_reached = max(max_depth_reached, outcome.depth)
            frontier.follow(outcome)
            if on_page is not None:
                on_page(outcome)

        # The start page: its fetch is reused, unless it redirected somewhere
        # robots.txt disallows (then what it said is not used).
        frontier.seen.add(url_hash(start))
        if first is None:
            frontier.blocked.append(start)
            frontier.blocked_count += 1
        else:
            frontier.seen.add(url_hash(first.final_url))
            if robots.allowed(first.final_url, agent):
                frontier.queued += 1
                record(build_outcome(first, start, 0, ctx_for(start), source="start", landing=True))
            else:
                stopped = stopped or "start_blocked_by_robots"
                frontier.blocked.append(first.final_url)
                frontier.blocked_count += 1

        # 3 and 4. Level by level from the start, then from the sitemap orphans.
        # Pages' redirects stay out of what robots.txt disallows; the sitemaps
        # (read above) and the external checks (below) are no pages of the site.
        fetcher.avoid = None if ignore else frontier.refuses
        depth = 1
        source = "link"
        seeded_orphans = False
        while True:
            if not frontier.next_level:
                if seeded_orphans or stopped:
                    break
                seeded_orphans = True
                for url in sitemap.urls:
                    frontier.admit(url, 0)
                depth, source = 0, "sitemap"
                continue
            level, frontier.next_level = frontier.next_level, []
            if deadline is not None and time.monotonic() >= deadline:
                unfinished += len(level)
                stopped = "time_budget"
                break

            async def work(url: str, depth: int = depth, source: str = source) -> PageOutcome:
                return await process_page(fetcher, url, depth, ctx_for(url), source=source)

            async def sink(batch: list[PageOutcome]) -> None:
                for outcome in batch:
                    record(outcome)

            report = await run_window(
                level,
                work,
                sink,
                policy=window_policy,
                host_of=_host,
                health_of=lambda outcome: fetch_health(outcome.result, window_policy),
                soft_deadline=deadline,
                batch_size=50,
            )
            window_peak = max(window_peak, report.peak)
            if report.unfinished:
                unfinished += len(report.unfinished)
                stopped = "time_budget"
                break
            # Only a seed level has a source of its own; what it links to is "link".
            depth, source = depth + 1, "link"

        # 5. External links, each distinct URL once.
        fetcher.avoid = None
        external: dict[str, FetchResult] = {}
        if limits.check_external and frontier.external and not stopped:

            async def check(url: str) -> FetchResult:
                return await fetcher.check(url)

            async def keep(batch: list[FetchResult]) -> None:
                for result in batch:
                    external[result.url] = result

            await run_window(
                list(frontier.external),
                check,
                keep,
                policy=WindowPolicy(
                    floor=min(2, concurrency),
                    start=min(4, concurrency),
                    cap=concurrency,
                    per_host=_EXTERNAL_PER_HOST,
                ),
                host_of=_host,
                health_of=lambda result: fetch_health(result, window_policy),
                soft_deadline=deadline,
            )

    broken = tuple(
        url
        for url, result in external.items()
        if result.broken and not is_unverified(result.status, result.error)
    )
    unverified = tuple(
        url for url, result in external.items() if is_unverified(result.status, result.error)
    )
    return CrawlReport(
        pages=pages,
        origin=origin,
        robots=robots,
        sitemap=sitemap,
        start_url=first.final_url if first is not None else start,
        status_counts=dict(statuses),
        max_depth_reached=max_depth_reached,
        blocked_by_robots=tuple(frontier.blocked),
        blocked_count=frontier.blocked_count,
        trapped=tuple(frontier.trapped),
        skipped_depth=frontier.skipped_depth,
        skipped_budget=frontier.skipped_budget,
        out_of_scope=frontier.out_of_scope,
        invalid_links=invalid_links,
        external=external,
        external_broken=broken,
        external_unverified=unverified,
        external_skipped=frontier.external_skipped,
        unfinished=unfinished,
        elapsed=time.monotonic() - began,
        window_peak=window_peak,
        stopped=stopped,
    )


def _host(item: str | PageOutcome) -> str:
    url = item if isinstance(item, str) else item.url
    return urlsplit(url).netloc

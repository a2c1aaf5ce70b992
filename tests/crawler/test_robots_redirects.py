"""robots.txt binds redirects too: a hop into a disallowed path of the crawled origin is not
followed, in the Fetcher (``avoid``) and in the library crawl; other origins and external
checks are not judged by it."""

from __future__ import annotations

import asyncio
from functools import partial

from crawler.crawl import CrawlLimits, CrawlReport, crawl_site
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.page import PageOutcome
from crawler.robots import Robots, disallowed_on, refused_landing
from crawler.types import FetchError, FetchResult, Hop
from tests.scripted_site import Answer, ScriptedSite, html_page

FAST = FetchPolicy(connect_timeout=2.0, read_timeout=2.0, deadline=5.0, backoff_base=0.01, backoff_cap=0.05)
RULES = "User-agent: *\nDisallow: /private/\n"
ROBOTS = Answer(RULES, ctype="text/plain")
AGENT = FAST.user_agent
SITE = "https://example.com"


def moved(to: str, status: int = 302) -> Answer:
    return Answer(b"", status=status, headers={"Location": to})


def robots(body: str = RULES) -> Robots:
    return Robots("ok", 200, body)


def test_only_the_origins_the_file_was_read_for_are_judged_by_it():
    rules = robots()
    assert disallowed_on(rules, (SITE,), AGENT, f"{SITE}/private/x")
    assert not disallowed_on(rules, (SITE,), AGENT, f"{SITE}/open")
    assert not disallowed_on(rules, (SITE,), AGENT, "https://other.example/private/x")
    assert not disallowed_on(rules, (SITE,), AGENT, "http://example.com/private/x")  # another origin too
    assert not disallowed_on(rules, (SITE,), AGENT, "http://[bad/private/x")  # the fetch reports a bad URL itself
    assert not disallowed_on(Robots("ignored", 200, RULES), (SITE,), AGENT, f"{SITE}/private/x")


def test_refused_landing_names_where_a_refused_redirect_points_and_nothing_else():
    refuses = partial(disallowed_on, robots(), (SITE,), AGENT)
    hop = (Hop(f"{SITE}/go", 302, f"{SITE}/private/x"),)
    refused = FetchResult(f"{SITE}/go", f"{SITE}/private/x", 302, hop)
    assert refused_landing(refused, refuses) == f"{SITE}/private/x"
    # A redirect that was followed answered with its landing's status; one that failed is no refusal.
    assert refused_landing(FetchResult(f"{SITE}/go", f"{SITE}/open", 200, hop), refuses) is None
    looped = FetchResult(f"{SITE}/go", f"{SITE}/private/x", 302, hop, error=FetchError.REDIRECT_LOOP)
    assert refused_landing(looped, refuses) is None
    assert refused_landing(FetchResult(f"{SITE}/go", f"{SITE}/go", 302), refuses) is None


def test_the_fetcher_does_not_follow_a_hop_its_avoid_refuses():
    async def fetch(site: ScriptedSite) -> FetchResult:
        guard = AddressGuard(allowed_targets=[("127.0.0.1", site.server.port)])
        refuses = partial(disallowed_on, robots(), (site.base,), AGENT)
        async with Fetcher(FAST, guard, avoid=refuses) as fetcher:
            return await fetcher.fetch(site.url("/go"))

    with ScriptedSite() as site:
        site.pages.update({"/go": moved("/private/x"), "/private/x": html_page("Secret")})
        result = asyncio.run(fetch(site))
    assert site.requests["/private/x"] == 0
    assert (result.status, result.error, result.final_url) == (302, None, site.url("/private/x"))
    assert result.redirects == (Hop(site.url("/go"), 302, site.url("/private/x")),)


def crawl(start: str, **limits) -> tuple[list[PageOutcome], CrawlReport]:
    seen: list[PageOutcome] = []
    limits = {"allow_private": True, "check_external": False, **limits}
    report = asyncio.run(crawl_site(start, CrawlLimits(**limits), on_page=seen.append, policy=FAST))
    return seen, report


def test_a_pages_redirect_into_a_disallowed_path_is_not_followed_and_counts_as_blocked():
    with ScriptedSite() as site:
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": html_page("Home", "/go", "/open"),
            "/go": moved("/private/x"),
            "/open": html_page("Open"),
            "/private/x": html_page("Secret"),
        })
        seen, report = crawl(site.url("/"))
    assert site.requests["/private/x"] == 0
    go = next(o for o in seen if o.url == site.url("/go"))
    assert (go.result.status, go.result.final_url, go.facts) == (302, site.url("/private/x"), None)
    assert report.blocked_by_robots == (site.url("/private/x"),)
    assert report.stopped == ""


def test_a_start_url_redirecting_into_a_disallowed_path_stops_the_crawl_without_requesting_it():
    with ScriptedSite() as site:
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": moved("/private/home"),
            "/private/home": html_page("Members only", "/open"),
        })
        seen, report = crawl(site.url("/"))
    assert site.requests["/private/home"] == 0
    assert (report.stopped, report.pages, seen) == ("start_blocked_by_robots", 0, [])
    assert report.blocked_by_robots == (site.url("/private/home"),)


def test_redirects_are_followed_when_robots_txt_is_not_respected():
    with ScriptedSite() as site:
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": html_page("Home", "/go"),
            "/go": moved("/private/x"),
            "/private/x": html_page("Secret"),
        })
        _, report = crawl(site.url("/"), respect_robots=False)
    assert site.requests["/private/x"] >= 1
    assert report.blocked_by_robots == ()


def test_an_external_links_check_is_not_judged_by_the_crawled_sites_robots_txt():
    """External checks are no pages of the crawl: their redirects are followed wherever they go."""
    with ScriptedSite() as site, ScriptedSite() as other:
        other.pages["/out"] = moved(site.url("/private/x"))
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": html_page("Home", other.url("/out")),
            "/private/x": html_page("Secret"),
        })
        _, report = crawl(site.url("/"), check_external=True)
    assert site.requests["/private/x"] >= 1
    checked = report.external[other.url("/out")]
    assert (checked.final_url, checked.status) == (site.url("/private/x"), 200)

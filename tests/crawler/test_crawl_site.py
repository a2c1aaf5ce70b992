"""The library end to end: crawl_site over the loopback fixture site, no database.

One full crawl (module fixture) backs the read-only assertions; tests that need
other limits crawl a fresh site of their own so request counts stay theirs.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

import pytest

from crawler.checks import CheckSettings, PageContext
from crawler.crawl import CrawlLimits, CrawlReport, crawl_site
from crawler.fetch import FetchPolicy
from crawler.page import PageOutcome, build_outcome, outlinks_of
from crawler.types import FetchResult, Link, PageFacts
from tests.crawler.fixture_site import (
    BROKEN_INTERNAL,
    CALENDAR_PREFIX,
    DISALLOWED,
    EXPECTED_DEPTHS,
    EXTERNAL_GONE,
    EXTERNAL_OK,
    NOINDEX,
    SITEMAP_ONLY,
    SITEMAP_ONLY_CHILD,
    START_REDIRECT,
    FixtureSite,
)
from tests.scripted_site import Answer, ScriptedSite, html_page

# Quick retries keep the 500 page from costing seconds of backoff.
FAST = FetchPolicy(
    connect_timeout=2.0, read_timeout=2.0, deadline=5.0, backoff_base=0.01, backoff_cap=0.05
)
# Above the fixture's real templates (9 /blog/post-{n}, 6 /products/item-{n}).
TRAP_BUDGET = 10


@dataclass
class Crawl:
    site: FixtureSite
    report: CrawlReport
    outcomes: dict[str, PageOutcome]  # by path on the site

    def outcome(self, path: str) -> PageOutcome:
        return self.outcomes[path]


def crawl(site: FixtureSite, start: str, **limits) -> Crawl:
    limits.setdefault("allow_private", True)
    limits.setdefault("trap_variants", TRAP_BUDGET)
    limits.setdefault("max_depth", 50)
    seen: list[PageOutcome] = []
    report = asyncio.run(crawl_site(start, CrawlLimits(**limits), on_page=seen.append, policy=FAST))
    outcomes = {}
    for outcome in seen:
        path = (
            outcome.result.final_url.removeprefix(site.base) if outcome.source == "start" else None
        )
        outcomes[path or outcome.url.removeprefix(site.base)] = outcome
    return Crawl(site, report, outcomes)


@pytest.fixture(scope="module")
def full():
    with FixtureSite() as site:
        yield crawl(site, site.url("/"))


def test_every_linked_page_is_found_at_its_click_depth(full):
    depths = {path: o.depth for path, o in full.outcomes.items() if path in EXPECTED_DEPTHS}
    assert depths == EXPECTED_DEPTHS
    assert full.report.origin == full.site.base


def test_each_page_is_fetched_once_although_many_pages_link_to_it(full):
    for path in EXPECTED_DEPTHS:
        if path in ("/server-error", "/old-products", "/products/"):
            continue  # retried 5xx, and the redirect that lands on /products/
        assert full.site.hits(path) == 1, path
    # The 500 was retried within the policy's budget, never more.
    assert full.site.hits("/server-error") == 1 + FAST.max_retries


def test_broken_internal_pages_are_reported_with_their_status(full):
    for path, status in BROKEN_INTERNAL.items():
        outcome = full.outcome(path)
        assert outcome.result.status == status
        assert outcome.result.broken
        code = "http_4xx" if status < 500 else "http_5xx"
        assert code in {f.code for f in outcome.findings}
    assert full.report.status_counts["404"] == 2
    assert full.report.status_counts["500"] == 1


def test_the_redirect_is_recorded_hop_by_hop(full):
    outcome = full.outcome("/old-products")
    assert outcome.result.final_url == full.site.url("/products/")
    assert [hop.status for hop in outcome.result.redirects] == [301]


def test_the_robots_disallowed_url_is_never_fetched(full):
    assert full.site.hits(DISALLOWED) == 0
    assert full.report.blocked_by_robots == (full.site.url(DISALLOWED),)
    assert full.report.robots.status == "ok"


def test_the_sitemap_only_page_is_found_and_crawled_as_a_seed(full):
    assert full.report.sitemap.found
    orphan = full.outcome(SITEMAP_ONLY)
    assert orphan.source == "sitemap" and orphan.depth == 0
    assert orphan.result.status == 200
    # Its own links are followed, measured from it.
    assert full.outcome(SITEMAP_ONLY_CHILD).depth == 1
    # Sitemap URLs reached through links keep their click depth.
    assert full.outcome("/blog/post-2").depth == 2


def test_the_calendar_trap_stops_at_its_budget(full):
    assert full.site.calendar_hits() == TRAP_BUDGET
    trapped = [url for url, _ in full.report.trapped]
    assert trapped == [full.site.url(f"{CALENDAR_PREFIX}2026-{TRAP_BUDGET + 1:02d}")]
    assert full.site.hits(f"{CALENDAR_PREFIX}2026-{TRAP_BUDGET:02d}") == 1
    assert "template" in full.report.trapped[0][1]


def test_the_noindex_page_is_crawled_and_flagged(full):
    assert "noindex" in {f.code for f in full.outcome(NOINDEX).findings}


def test_external_links_are_checked_once_per_distinct_url(full):
    ok, gone = full.site.elsewhere + EXTERNAL_OK, full.site.elsewhere + EXTERNAL_GONE
    # /ok is linked from two pages but checked once, with HEAD.
    assert full.site.elsewhere_requests == {("HEAD", EXTERNAL_OK): 1, ("HEAD", EXTERNAL_GONE): 1}
    assert set(full.report.external) == {ok, gone}
    assert full.report.external_broken == (gone,)


def test_outlinks_are_normalised_deduplicated_and_invalid_ones_counted(full):
    home = full.outcome("/")
    urls = [link.url for link in home.outlinks]
    assert urls.count(full.site.url("/about")) == 1  # "/about#team" is the same page
    assert all("#" not in url for url in urls)
    assert home.invalid_links >= 1  # http://[not-a-host/
    assert full.report.invalid_links >= 1


def test_a_start_url_that_redirects_anchors_the_crawl_on_the_final_origin():
    with FixtureSite() as site:
        result = crawl(site, site.elsewhere + START_REDIRECT, check_external=False)
        assert result.report.origin == site.base
        assert result.report.start_url == site.url("/")
        # The start fetch is the home page: it is not fetched a second time.
        assert site.hits("/") == 1
        assert result.outcomes["/"].source == "start"
        assert result.outcomes["/"].result.redirects[0].status == 302
        # The start's own origin was asked for its robots.txt first (404: allowed).
        assert site.elsewhere_requests == {("GET", "/robots.txt"): 1, ("GET", START_REDIRECT): 1}
        assert result.report.pages >= len(EXPECTED_DEPTHS)


def test_max_pages_caps_what_is_fetched():
    with FixtureSite() as site:
        result = crawl(site, site.url("/"), max_pages=5, check_external=False)
        assert result.report.pages == 5
        assert result.report.skipped_budget > 0
        fetched = {
            p for (m, p), n in site.requests.items() if p not in ("/robots.txt", "/sitemap.xml")
        }
        assert len(fetched) == 5


def test_max_depth_stops_discovery_but_keeps_true_depths():
    with FixtureSite() as site:
        result = crawl(site, site.url("/"), max_depth=1, check_external=False)
        assert result.report.max_depth_reached == 1
        assert site.hits("/team") == 0 and site.hits("/blog/post-1") == 0
        assert result.report.skipped_depth > 0
        # /blog/post-2 is in the sitemap but was reached by links (too deep):
        # it is not an orphan, so it is not crawled as a seed either.
        assert site.hits("/blog/post-2") == 0
        assert result.outcome(SITEMAP_ONLY).source == "sitemap"


def test_respect_robots_off_fetches_the_disallowed_page():
    with FixtureSite() as site:
        result = crawl(site, site.url("/"), respect_robots=False, check_external=False)
        assert site.hits(DISALLOWED) == 1
        assert result.report.robots.status == "ignored"
        assert result.report.blocked_by_robots == ()


def test_exclude_pattern_keeps_matching_pages_out_of_the_crawl():
    with FixtureSite() as site:
        result = crawl(site, site.url("/"), exclude=(r"/blog/",), check_external=False)
        assert not any(p.startswith("/blog/") for (_, p) in site.requests)
        assert result.report.out_of_scope >= 1
        assert site.hits("/products/item-1") == 1


def test_check_external_off_sends_nothing_to_other_origins():
    with FixtureSite() as site:
        result = crawl(site, site.url("/"), check_external=False)
        assert site.elsewhere_requests == {}
        assert result.report.external == {}


def test_time_budget_stops_new_work_and_counts_what_was_left():
    with FixtureSite() as site:
        result = crawl(site, site.url("/"), time_budget=0.0, check_external=False)
        assert result.report.stopped == "time_budget"
        assert result.report.pages == 1
        assert result.report.unfinished > 0


def _closed_port() -> int:
    with socket.socket() as sock:  # a port that was free a moment ago refuses connections
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_site_stops_at_its_robots_txt_with_a_reason():
    report = asyncio.run(
        crawl_site(
            f"http://127.0.0.1:{_closed_port()}/",
            CrawlLimits(allow_private=True, check_external=False),
            policy=FAST,
        )
    )
    assert report.stopped == "robots_unavailable"
    assert report.pages == 0
    assert report.robots.status == "unavailable"
    assert report.robots.http_status is None


def test_an_unreachable_start_url_is_recorded_when_robots_are_ignored():
    report = asyncio.run(
        crawl_site(
            f"http://127.0.0.1:{_closed_port()}/",
            CrawlLimits(allow_private=True, check_external=False, respect_robots=False),
            policy=FAST,
        )
    )
    assert report.stopped == "start_unreachable"
    assert report.pages == 1
    assert report.status_counts == {"connect_failed": 1}


def test_robots_txt_answering_503_means_no_page_is_requested():
    with FixtureSite(robots_status=503) as site:
        result = crawl(site, site.url("/"))
        assert result.report.stopped == "robots_unavailable"
        assert result.report.pages == 0
        assert set(site.requests) == {("GET", "/robots.txt")}
        assert site.elsewhere_requests == {}


def test_robots_txt_answering_404_allows_everything():
    with FixtureSite(robots_status=404) as site:
        result = crawl(site, site.url("/"), check_external=False)
        assert result.report.robots.status == "missing"
        assert site.hits(DISALLOWED) == 1
        # No Sitemap line to follow, so /sitemap.xml is where the sitemap is found.
        assert result.report.sitemap.found
        assert result.outcome(SITEMAP_ONLY).source == "sitemap"


def test_the_ssrf_guard_refuses_loopback_unless_private_targets_are_allowed():
    with FixtureSite() as site:
        report = asyncio.run(
            crawl_site(site.url("/"), CrawlLimits(check_external=False), policy=FAST)
        )
        # Even robots.txt is refused before any socket opens.
        assert site.requests == {}
        assert report.pages == 0
        assert report.stopped == "robots_unavailable"
        report = asyncio.run(
            crawl_site(
                site.url("/"),
                CrawlLimits(check_external=False, respect_robots=False),
                policy=FAST,
            )
        )
        assert report.status_counts == {"ssrf_blocked": 1}
        assert site.requests == {}


def _ctx() -> PageContext:
    return PageContext(
        settings=CheckSettings(), is_internal=lambda url: url.startswith("http://a.test/")
    )


def test_a_non_html_response_is_not_parsed_and_has_no_outlinks():
    result = FetchResult(
        url="http://a.test/file.pdf",
        final_url="http://a.test/file.pdf",
        status=200,
        content_type="application/pdf",
        body=None,
    )
    outcome = build_outcome(result, result.url, 3, _ctx())
    assert outcome.facts is None and outcome.outlinks == () and outcome.depth == 3


def test_outlinks_keep_one_link_per_url_and_tag_in_document_order():
    facts = PageFacts(
        base_url="http://a.test/dir/",
        links=(
            Link("http://A.test:80/x#top", "a", "X"),
            Link("http://a.test/x", "a", "again"),
            Link("http://a.test/x", "img"),
            Link("mailto:someone@a.test", "a"),
            Link("y?b=2&a=1", "a"),
        ),
    )
    links, invalid = outlinks_of(facts, "http://a.test/dir/page")
    assert [(link.url, link.tag, link.text) for link in links] == [
        ("http://a.test/x", "a", "X"),
        ("http://a.test/x", "img", ""),
        ("http://a.test/dir/y?b=2&a=1", "a", ""),
    ]
    assert invalid == 1


def test_a_redirect_at_the_depth_limit_still_has_the_page_it_lands_on_parsed():
    with ScriptedSite() as web:
        web.pages.update({"/": html_page("Home", "/docs"), "/docs": Answer(b"", status=301, headers={"Location": "/docs/"}),
                          "/docs/": html_page("The docs")})
        seen: list[PageOutcome] = []
        asyncio.run(crawl_site(web.url("/"), CrawlLimits(allow_private=True, max_depth=1, check_external=False),
                               on_page=seen.append, policy=FAST))
    by_url = {o.url: o for o in seen}
    assert by_url[web.url("/docs")].facts is None  # the redirect
    assert by_url[web.url("/docs/")].facts.title == "The docs"

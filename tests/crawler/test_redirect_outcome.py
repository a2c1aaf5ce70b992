"""What a fetch that went through redirects becomes: a redirect whose one outlink is where it landed.

Pure: the fetch results are built here, as the fetcher returns them.
"""

from crawler.catalogue import ANSWER_CODES
from crawler.checks import CheckSettings, PageContext
from crawler.page import REDIRECT_TAG, build_outcome
from crawler.types import FetchError, FetchResult, Hop, Link

SITE = "https://example.com"
PAGE = b"<html><head></head><body><p>No title, no description, no H1.</p><a href='/x'>x</a></body></html>"
CTX = PageContext(CheckSettings(), is_internal=lambda url: url.startswith(SITE + "/"), in_sitemap=False)


def landed(url: str, final: str, **result) -> FetchResult:
    defaults = {"status": 200, "content_type": "text/html", "body": PAGE, "size": len(PAGE)}
    return FetchResult(url=url, final_url=final, redirects=(Hop(url, 301, final),), **{**defaults, **result})


def test_a_redirect_is_judged_on_its_answer_and_links_only_to_where_it_landed():
    outcome = build_outcome(landed(f"{SITE}/old", f"{SITE}/new"), f"{SITE}/old", 2, CTX)

    assert outcome.facts is None and outcome.result.body is None
    assert outcome.outlinks == (Link(f"{SITE}/new", REDIRECT_TAG),)
    assert {f.code for f in outcome.findings} <= ANSWER_CODES


def test_a_redirect_to_a_page_too_large_to_read_queues_that_page_and_is_no_large_html_itself():
    result = landed(f"{SITE}/old", f"{SITE}/huge", body=None, error=FetchError.BODY_TOO_LARGE)

    outcome = build_outcome(result, f"{SITE}/old", 1, CTX)

    assert outcome.outlinks == (Link(f"{SITE}/huge", REDIRECT_TAG),)
    assert outcome.result.error is None
    assert "large_html" not in {f.code for f in outcome.findings}


def test_a_redirect_that_lands_on_its_own_url_normalised_is_the_page():
    outcome = build_outcome(landed(f"{SITE}/~me", f"{SITE}/%7Eme"), f"{SITE}/~me", 1, CTX)

    assert outcome.facts is not None
    assert [link.url for link in outcome.outlinks] == [f"{SITE}/x"]
    assert "title_missing" in {f.code for f in outcome.findings}


def test_a_start_that_stands_for_where_it_landed_is_parsed():
    outcome = build_outcome(landed(f"{SITE}/", f"{SITE}/en/"), f"{SITE}/", 0, CTX, landing=True)

    assert outcome.facts is not None and outcome.outlinks[0].tag == "a"


def test_a_redirect_to_a_broken_page_stays_the_broken_answer_for_finalize_to_report():
    outcome = build_outcome(landed(f"{SITE}/old", f"{SITE}/gone", status=404, body=None), f"{SITE}/old", 1, CTX)

    assert outcome.outlinks == () and outcome.result.status == 404


def test_a_redirect_is_judged_slow_by_its_own_answer_not_by_the_page_it_lands_on():
    fast_hop_slow_page = FetchResult(url=f"{SITE}/old", final_url=f"{SITE}/new", status=200, content_type="text/html",
                                     body=PAGE, size=len(PAGE), ttfb=1.5,
                                     redirects=(Hop(f"{SITE}/old", 301, f"{SITE}/new", ttfb=0.02),))
    outcome = build_outcome(fast_hop_slow_page, f"{SITE}/old", 1, CTX)
    assert outcome.result.ttfb == 0.02 and "slow_response" not in {f.code for f in outcome.findings}
    slow_hop = FetchResult(url=f"{SITE}/old", final_url=f"{SITE}/new", status=200, content_type="text/html",
                           body=PAGE, size=len(PAGE), ttfb=0.05,
                           redirects=(Hop(f"{SITE}/old", 301, f"{SITE}/new", ttfb=1.2),))
    assert "slow_response" in {f.code for f in build_outcome(slow_hop, f"{SITE}/old", 1, CTX).findings}

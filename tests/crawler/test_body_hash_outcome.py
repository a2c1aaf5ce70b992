"""A parsed page's outcome carries its body's hash, what the next delta audit compares a 200 against.

Pure: the fetch results are built here, as the fetcher returns them.
"""

from crawler.checks import CheckSettings, PageContext
from crawler.page import build_outcome
from crawler.revalidate import Validators, unchanged
from crawler.types import FetchResult, Hop

SITE = "https://example.com"
PAGE = b"<html><head><title>Home</title></head><body><h1>Home</h1><a href='/x'>x</a></body></html>"
CTX = PageContext(CheckSettings(), is_internal=lambda url: url.startswith(SITE + "/"), in_sitemap=False)


def fetched(body: bytes = PAGE, **result) -> FetchResult:
    fields = {"url": f"{SITE}/", "final_url": f"{SITE}/", "status": 200, "content_type": "text/html",
              "body": body, "size": len(body)}
    return FetchResult(**{**fields, **result})


def test_a_parsed_page_carries_the_hash_a_later_fetch_of_the_same_body_matches():
    outcome = build_outcome(fetched(), f"{SITE}/", 0, CTX)
    stored = Validators(body_hash=outcome.body_hash, content_type="text/html")

    assert outcome.facts is not None and len(outcome.body_hash) == 32
    assert unchanged(fetched(), stored)
    assert not unchanged(fetched(PAGE.replace(b"Home", b"Away")), stored)


def test_an_outcome_without_parsed_facts_carries_no_hash():
    moved = fetched(redirects=(Hop(f"{SITE}/", 301, f"{SITE}/new"),), final_url=f"{SITE}/new")
    not_html = fetched(b"%PDF-1.7", content_type="application/pdf")

    assert build_outcome(moved, f"{SITE}/", 0, CTX).body_hash == ""
    assert build_outcome(not_html, f"{SITE}/", 0, CTX).body_hash == ""

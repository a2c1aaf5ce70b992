"""The three ways a page is read, for tests that prove they agree: the lxml tree, its event path, bs4."""

from __future__ import annotations

from crawler.checks import CheckSettings, PageContext, run_page_checks
from crawler.parse import parse_html
from crawler.parse_bs4 import parse_html_bs4
from crawler.types import FetchResult, Finding

URL = "https://example.com/guide"


def deep(body: bytes) -> bytes:
    """``body`` nested past libxml2's tree limit, so ``parse_html`` reads it as events."""
    return b"<div>" * 300 + body


# Each takes the body and the charset the answer's Content-Type names (or None).
READERS = {
    "tree": lambda body, charset=None: parse_html(body, URL, http_charset=charset),
    "events": lambda body, charset=None: parse_html(deep(body), URL, http_charset=charset),
    "bs4": lambda body, charset=None: parse_html_bs4(body, URL, http_charset=charset),
}


def page_findings(body: bytes) -> list[Finding]:
    """What the page checks report for ``body`` served as a 200 HTML page at URL."""
    result = FetchResult(url=URL, final_url=URL, status=200, content_type="text/html", body=body, size=len(body))
    ctx = PageContext(CheckSettings(), is_internal=lambda url: url.startswith(URL), in_sitemap=False)
    return run_page_checks(result, parse_html(body, URL), ctx)

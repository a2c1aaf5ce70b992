"""How much a chunk writes at once: SUB_BATCH parsed pages, or twice as many resource and
external checks (small rows, so a write's fixed costs weigh more), or a mix by weight."""

from audits.crawl.chunk import PAGE_WEIGHT, weight
from crawler.page import PageOutcome
from crawler.parse import parse_html
from crawler.types import FetchResult

URL = "http://127.0.0.1:9/x"


def outcome(parsed: bool) -> PageOutcome:
    facts = parse_html(b"<html><head><title>t</title></head><body><a href='/y'>y</a></body></html>", URL) \
        if parsed else None
    return PageOutcome(URL, 1, FetchResult(URL, URL, status=200), facts, (), ())


def test_a_parsed_page_weighs_more_than_a_check():
    assert weight(outcome(parsed=True)) == PAGE_WEIGHT > 1 == weight(outcome(parsed=False))

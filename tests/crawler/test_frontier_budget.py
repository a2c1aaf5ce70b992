"""The Django-free crawl's in-memory frontier against pages of many distinct,
long links: what it keeps per URL and what it does once the page budget is spent."""

from __future__ import annotations

import sys

from crawler.crawl import CrawlLimits, _Frontier
from crawler.urls import Scope

ORIGIN = "http://127.0.0.1:8000"


class CountingRobots:
    """Stands in for Robots: allows everything and counts how often it is asked
    (one match costs ~10 ms against a 500 KB robots.txt of wildcard rules)."""

    def __init__(self) -> None:
        self.asked = 0

    def allowed(self, url: str, user_agent: str) -> bool:
        self.asked += 1
        return True


def frontier(max_pages: int) -> tuple[_Frontier, CountingRobots]:
    robots = CountingRobots()
    return _Frontier(CrawlLimits(max_pages=max_pages), Scope(ORIGIN), robots), robots


def test_seen_keeps_a_fixed_size_digest_per_url_not_the_url():
    front, _ = frontier(max_pages=10_000)
    pad = "a" * 2000
    for i in range(500):
        front.admit(f"{ORIGIN}/{i}-{pad}", 1)
    assert front.queued == 500
    assert {len(key) for key in front.seen} == {32}
    assert sum(sys.getsizeof(key) for key in front.seen) < 500 * 100


def test_urls_past_the_length_limit_are_trapped_before_they_are_kept():
    front, robots = frontier(max_pages=10)
    long_url = f"{ORIGIN}/{'b' * 5000}"
    assert not front.admit(long_url, 1)
    assert front.seen == set()
    assert robots.asked == 0
    (listed, reason), = front.trapped
    assert len(listed) <= 2048 and "characters long" in reason


def test_once_the_page_budget_is_spent_new_urls_are_only_counted():
    front, robots = frontier(max_pages=3)
    for i in range(2000):
        front.admit(f"{ORIGIN}/page-{i}", 1)
    assert front.queued == 3
    assert front.skipped_budget == 1997
    assert len(front.seen) == 3  # nothing kept past the budget
    assert robots.asked == 3  # and robots.txt was asked only about the queued ones

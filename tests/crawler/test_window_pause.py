"""A 429 with a Retry-After pauses its whole host in the window, not just its URL.

Two loopback servers: one throttles once it has answered a few requests (429,
Retry-After: 2, to every request for the next two seconds) and records when
each request came; the other is a second host that must not wait with it. The
fetches are real (a Fetcher that hands long waits back as RATE_LIMITED, as the
audit's does), so the test sees what the throttled site would.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.types import FetchError, FetchResult
from crawler.window import WindowPolicy, WindowReport, fetch_health, fetch_pause, run_window
from tests.crawler.hostile_server import Arrivals, HostileServer, Throttle

# What the audit's fetcher does with a Retry-After: up to 1 s is slept in the fetch, longer comes back at once.
RESCHEDULING = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0, max_retries=0,
                           retry_after_cap=1.0, reschedule_cap=60.0)
WAIT = 2


def serve(server: HostileServer, handler, count: int) -> list[str]:
    for n in range(count):
        server.route(f"/p{n}", handler)
    return [server.url(f"/p{n}") for n in range(count)]


@dataclass
class Crawl:
    report: WindowReport
    results: dict[str, FetchResult] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)  # when the window started each fetch
    told: list[float] = field(default_factory=list)  # when the window read each pause from a result

    def started_between(self, urls: list[str], begin: float, end: float) -> list[str]:
        return [url for url in urls if url in self.started and begin < self.started[url] < end]


def crawl(items: list[str], servers: list[HostileServer], policy: WindowPolicy, **kwargs) -> Crawl:
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port) for server in servers])
    seen = Crawl(WindowReport(0, [], 0, 0))

    def pause_of(result: FetchResult) -> float:
        pause = fetch_pause(result)
        if pause:
            seen.told.append(time.monotonic())
        return pause

    async def run():
        async with Fetcher(RESCHEDULING, guard, concurrency=policy.cap) as fetcher:

            async def fetch(url: str) -> FetchResult:
                seen.started[url] = time.monotonic()
                return await fetcher.fetch(url)

            async def sink(batch: list[FetchResult]) -> None:
                seen.results.update((result.url, result) for result in batch)

            return await run_window(
                items, fetch, sink, policy=policy, host_of=lambda url: url.split("/")[2],
                health_of=lambda result: fetch_health(result, policy), pause_of=pause_of, **kwargs)

    seen.report = asyncio.run(run())
    return seen


def test_a_retry_after_pauses_the_host_then_its_pages_are_fetched_while_another_host_goes_on():
    throttle, other = Throttle(allow=3, wait=WAIT), Arrivals()
    with HostileServer() as site, HostileServer() as elsewhere:
        pages = serve(site, throttle, 10)
        others = serve(elsewhere, other, 4)
        # The site's pages first: the other host's only start when the site's cannot.
        seen = crawl(pages + others, [site, elsewhere], WindowPolicy(floor=1, start=2, cap=2, per_host=2))
    assert seen.report.unfinished == [] and len(seen.results) == 14
    told = min(seen.told)
    assert seen.started_between(pages, told, told + WAIT) == []
    # The only requests that reached the site in its pause are the ones answered 429 (the first
    # began it), and they had started before the window read one: one or two already in flight.
    limited = [url for url in pages if seen.results[url].error is FetchError.RATE_LIMITED]
    assert 1 <= len(limited) <= 2 and all(seen.started[url] <= told for url in limited)
    assert len(throttle.during_pause()) == len(limited)
    # Every page started after the pause was fetched.
    assert all(seen.results[url].status == 200 for url in pages if url not in limited)
    assert len(throttle.arrivals) == 10
    # The other host was not held back: all of it ran while the site waited.
    assert all(told < t < told + WAIT for t in other.times)


def test_a_pause_past_the_soft_deadline_hands_the_hosts_unstarted_items_back_at_once():
    # Nothing could start on the site before the deadline: a run that slept until it would hold its
    # worker for nothing (for the audit, the next chunk waits the pause out without one).
    throttle = Throttle(allow=2, wait=30)
    with HostileServer() as site:
        pages = serve(site, throttle, 8)
        began = time.monotonic()
        seen = crawl(pages, [site], WindowPolicy(floor=1, start=1, cap=1, per_host=1), soft_deadline=began + 3.0)
    assert len(throttle.arrivals) == 3  # two pages, then the one that was told to wait
    assert seen.report.unfinished == pages[3:]
    assert seen.results[pages[2]].retry_after == 30.0
    assert time.monotonic() - began < 1.5  # as the pause was read, not at the deadline


def test_a_host_paused_past_the_deadline_from_the_start_is_handed_back_while_another_host_goes_on():
    site_times, other_times = Arrivals(), Arrivals(delay=0.2)
    refills: list[int] = []

    async def refill() -> list[str]:
        refills.append(1)
        return []

    with HostileServer() as site, HostileServer() as elsewhere:
        pages, others = serve(site, site_times, 3), serve(elsewhere, other_times, 2)
        began = time.monotonic()
        seen = crawl(pages + others, [site, elsewhere], WindowPolicy(floor=1, start=2, cap=2, per_host=1),
                     soft_deadline=began + 5.0, paused_until={pages[0].split("/")[2]: began + 30.0},
                     refill=refill)
    assert seen.report.unfinished == pages and site_times.times == []
    assert sorted(seen.results) == others  # the other host's items all ran, one after the other
    assert time.monotonic() - began < 2.0 and refills == []


def crawl_raising_a_pause(delay: float, at: float, pause: float):
    """Twelve pages of one host, one at a time; ``at`` seconds in, another thread pauses the host for ``pause``
    seconds through the mapping the window was given (for the audit, a chunk beside this one's Retry-After).

    Returns what was seen, the pages, their arrival times, when the pause ends and when the run began."""
    site_times = Arrivals(delay=delay)
    with HostileServer() as site:
        pages = serve(site, site_times, 12)
        host = pages[0].split("/")[2]
        began = time.monotonic()
        resume = {host: 0.0}
        raise_at = threading.Timer(at, lambda: resume.update({host: time.monotonic() + pause}))
        raise_at.start()
        try:
            seen = crawl(pages, [site], WindowPolicy(floor=1, start=1, cap=1, per_host=1),
                         soft_deadline=began + 10.0, paused_until=resume)
        finally:
            raise_at.cancel()
    return seen, pages, site_times.times, resume[host], began


def test_a_pause_raised_while_the_run_goes_on_holds_the_host_from_the_next_start():
    seen, _, times, resume, _ = crawl_raising_a_pause(delay=0.1, at=0.35, pause=1.0)
    assert seen.report.unfinished == [] and len(seen.results) == 12
    raised = resume - 1.0
    # The fetch in flight when it was raised may end, but none starts in the pause.
    assert [t for t in times if raised + 0.15 < t < resume] == []
    assert len([t for t in times if t < raised]) >= 2  # it ran before the pause ...
    assert len([t for t in times if t >= resume]) >= 2  # ... and after it


def test_a_pause_raised_past_the_deadline_hands_the_hosts_items_back_at_the_next_round():
    seen, pages, _, _, began = crawl_raising_a_pause(delay=0.2, at=0.5, pause=60.0)
    assert 1 <= len(seen.results) <= 4 and seen.report.unfinished == pages[len(seen.results):]
    assert time.monotonic() - began < 2.0


def test_the_scheduler_sleeps_through_a_pause_without_spinning(window_wakes):
    throttle = Throttle(allow=1, wait=WAIT)
    with HostileServer() as site:
        pages = serve(site, throttle, 4)
        seen = crawl(pages, [site], WindowPolicy(floor=1, start=1, cap=1, per_host=1))
    assert seen.report.unfinished == [] and seen.results[pages[1]].error is FetchError.RATE_LIMITED
    assert [seen.results[url].status for url in pages[2:]] == [200, 200]
    assert throttle.arrivals[2] - throttle.arrivals[1] >= WAIT
    assert window_wakes[0] < 50  # a busy loop wakes thousands of times in two seconds


def test_fetch_pause_is_the_wait_a_rate_limited_result_carries_and_nothing_else():
    url = "http://127.0.0.1/"
    assert fetch_pause(FetchResult(url, url, status=429, error=FetchError.RATE_LIMITED, retry_after=30.0)) == 30.0
    # Given up (a wait past the cap, or a 429 that never said when): nothing to wait for.
    assert fetch_pause(FetchResult(url, url, status=429, error=FetchError.RATE_LIMITED)) == 0.0
    assert fetch_pause(FetchResult(url, url, status=200)) == 0.0


def test_a_pause_given_at_the_start_holds_its_host_from_the_first_start_while_another_host_goes_on():
    # An earlier chunk's Retry-After: the site's first start waits for it, past its opening spacing.
    site_times, other_times = Arrivals(), Arrivals()
    with HostileServer() as site, HostileServer() as elsewhere:
        pages, others = serve(site, site_times, 2), serve(elsewhere, other_times, 2)
        began = time.monotonic()
        seen = crawl(pages + others, [site, elsewhere],
                     WindowPolicy(floor=1, start=2, cap=2, per_host=2, crawl_delay=0.1, spaced_from_start=True),
                     soft_deadline=began + 5.0, paused_until={pages[0].split("/")[2]: began + 1.0})
    assert seen.report.unfinished == [] and len(seen.results) == 4
    assert min(site_times.times) >= began + 1.0
    assert max(other_times.times) < began + 1.0

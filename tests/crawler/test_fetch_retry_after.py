"""Retry-After with a caller that can reschedule (RELIABILITY #24): short waits are slept
inside the fetch, longer ones come back at once as RATE_LIMITED carrying the wait,
and waits past the reschedule cap give the URL up. The clock and sleep are injected,
so nothing here really waits."""

from __future__ import annotations

import asyncio
import datetime

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.types import FetchError
from tests.crawler.hostile_server import OK_HTML, HostileServer, Sleeps, respond

# What the audit runs with: sleep up to 3 s in-task, reschedule up to 10 minutes.
RESCHEDULING = FetchPolicy(
    connect_timeout=1.0, read_timeout=1.0, deadline=3.0, retry_after_cap=3.0, reschedule_cap=600.0
)
NOW = datetime.datetime(2030, 1, 1, 12, 0, 0, tzinfo=datetime.UTC).timestamp()


def fetch(server: HostileServer, path: str, *, policy: FetchPolicy = RESCHEDULING, sleeps=None,
          method: str = "fetch"):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(policy, guard, sleep=sleeps or Sleeps(), clock=lambda: NOW) as fetcher:
            return await getattr(fetcher, method)(server.url(path))

    return asyncio.run(run())


def throttled_once(retry_after: str):
    """429 with ``retry_after`` on the first request, then the page."""

    async def handler(request, reader, writer, server) -> None:
        if server.requests[request.path] > 1:
            await respond(request, writer, server, body=OK_HTML)
            return
        await respond(request, writer, server, status=429, headers={"Retry-After": retry_after})

    return handler


def test_a_wait_within_the_in_task_cap_is_slept_and_the_page_fetched(server):
    server.route("/ra", throttled_once("2"))
    sleeps = Sleeps()
    result = fetch(server, "/ra", sleeps=sleeps)
    assert result.status == 200 and result.error is None and result.retry_after is None
    assert sleeps.calls == [2.0]


def test_retry_after_5_comes_back_at_once_rate_limited_with_the_wait(server):
    sleeps = Sleeps()
    result = fetch(server, "/status?code=429&retry_after=5", sleeps=sleeps)
    assert result.error is FetchError.RATE_LIMITED and result.status == 429
    assert result.retry_after == 5.0
    assert "5 s" in result.error_detail
    assert server.requests["/status"] == 1 and sleeps.calls == []


def test_an_http_date_retry_after_is_measured_on_the_injected_clock(server):
    date = "Tue,%2001%20Jan%202030%2012:00:30%20GMT"  # 30 s after NOW
    result = fetch(server, f"/status?code=503&retry_after={date}")
    assert result.error is FetchError.RATE_LIMITED and result.status == 503
    assert result.retry_after == 30.0


def test_an_http_date_past_the_reschedule_cap_gives_up(server):
    date = "Wed,%2002%20Jan%202030%2012:00:00%20GMT"  # a day after NOW
    result = fetch(server, f"/status?code=429&retry_after={date}")
    assert result.error is FetchError.RATE_LIMITED and result.retry_after is None
    assert "more than the 600 s cap" in result.error_detail


def test_retry_after_999999_gives_up_at_once_with_no_retry_time(server):
    sleeps = Sleeps()
    result = fetch(server, "/status?code=429&retry_after=999999", sleeps=sleeps)
    assert result.error is FetchError.RATE_LIMITED and result.retry_after is None
    assert "999999 s, more than the 600 s cap" in result.error_detail
    assert server.requests["/status"] == 1 and sleeps.calls == []


def test_a_429_that_stays_throttled_is_handed_back_for_at_least_the_pause(server):
    sleeps = Sleeps()
    result = fetch(server, "/status?code=429&retry_after=1", sleeps=sleeps)
    assert server.requests["/status"] == 1 + RESCHEDULING.max_retries
    assert sleeps.calls == [1.0, 1.0]  # the short waits were slept in-task
    assert result.error is FetchError.RATE_LIMITED
    assert result.retry_after == RESCHEDULING.rate_limited_pause
    assert "Still 429 after 3 attempts" in result.error_detail


def test_a_503_that_keeps_its_retry_after_is_handed_back_but_a_bare_503_is_an_answer(server):
    throttled = fetch(server, "/status?code=503&retry_after=1")
    assert throttled.error is FetchError.RATE_LIMITED
    assert throttled.retry_after == RESCHEDULING.rate_limited_pause
    plain = fetch(server, "/status?code=503")
    assert plain.status == 503 and plain.error is None and plain.retry_after is None


def test_a_500_with_a_long_retry_after_is_a_500_not_a_reschedule(server):
    result = fetch(server, "/status?code=500&retry_after=20")
    assert result.status == 500 and result.error is None and result.retry_after is None


def test_a_redirect_to_a_throttled_url_hands_back_the_url_asked_for(server):
    result = fetch(server, "/redirect?to=/status%3Fcode%3D429%26retry_after%3D7")
    assert result.url.endswith("/redirect?to=/status%3Fcode%3D429%26retry_after%3D7")
    assert result.retry_after == 7.0 and len(result.redirects) == 1


def test_a_link_check_hands_back_the_wait_too(server):
    result = fetch(server, "/status?code=429&retry_after=5", method="check")
    assert result.method == "HEAD" and result.retry_after == 5.0


def test_a_fetcher_that_cannot_reschedule_gives_up_past_its_cap_as_before(server):
    result = fetch(server, "/status?code=429&retry_after=60", policy=FetchPolicy())
    assert result.error is FetchError.RATE_LIMITED and result.retry_after is None
    assert "more than the 30 s cap" in result.error_detail


def test_a_429_that_never_says_when_is_given_up_after_its_retries_not_handed_back(server):
    # Without a Retry-After the server has not said when to come back; more
    # rounds of retries later would only hammer it (RELIABILITY #25's bound).
    result = fetch(server, "/status?code=429")
    assert server.requests["/status"] == 1 + RESCHEDULING.max_retries
    assert result.error is FetchError.RATE_LIMITED and result.retry_after is None


def test_a_500_with_a_retry_after_past_the_cap_still_gets_its_backoff_retries(server):
    sleeps = Sleeps()
    result = fetch(server, "/status?code=500&retry_after=20", sleeps=sleeps)
    assert result.status == 500 and result.error is None
    assert server.requests["/status"] == 1 + RESCHEDULING.max_retries
    assert len(sleeps.calls) == RESCHEDULING.max_retries
    assert all(delay <= RESCHEDULING.backoff_cap for delay in sleeps.calls)  # the header was ignored


def test_a_bare_503_out_of_budget_stays_a_503_answer_not_rate_limited(server):
    # Any backoff (at least 0.25 s) overruns a 0.1 s budget after the first answer.
    short_budget = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=1.0, total_budget=0.1,
                               reschedule_cap=600.0)
    result = fetch(server, "/status?code=503", policy=short_budget)
    assert server.requests["/status"] == 1
    assert result.status == 503 and result.error is None and result.retry_after is None

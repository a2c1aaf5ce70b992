"""When to try a URL again: statuses worth a retry, Retry-After, backoff with jitter.

The fetcher asks ``RetryPlanner.plan`` about every answer; the policy's numbers
(``FetchPolicy``) say how many tries, how long a wait is slept in place, and how
long one may be handed back to a caller that can come back to the URL later.
"""

from __future__ import annotations

import email.utils
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # fetch imports this module; the policy is only a type here
    from .fetch import FetchPolicy


@dataclass(frozen=True)
class Plan:
    """What to do about a status: ``final``, ``retry`` after ``delay``, or ``rate_limited``.

    A ``rate_limited`` plan with ``retry_after`` set is one the caller may
    reschedule; without it the URL is given up.
    """

    action: str = "final"
    delay: float = 0.0
    reason: str = ""
    retry_after: float | None = None


FINAL = Plan()


class RetryPlanner:
    """One per Fetcher: its policy, the wall clock Retry-After dates are measured on, its jitter."""

    def __init__(self, policy: FetchPolicy, clock: Callable[[], float], rng: random.Random) -> None:
        self.policy = policy
        self.clock = clock
        self.random = rng

    def plan(
        self, status: int, headers: dict[str, str], attempt: int, last: bool, budget_end: float
    ) -> Plan:
        """Decide from the status and Retry-After whether this answer is final.

        Only 429 and 503 are throttling: a Retry-After on any other retried
        status is ignored past the cap (a 500 stays a 500).
        """
        policy = self.policy
        if status not in policy.retry_statuses:
            return FINAL
        throttled = status in (429, 503)
        wait = parse_retry_after(headers.get("retry-after"), self.clock(), headers.get("date"))
        if wait is not None and wait > policy.retry_after_cap and not throttled:
            # A failing server's long wait is not a throttle: its ordinary retries and backoff still apply.
            wait = None
        if wait is not None and wait > policy.retry_after_cap:
            if wait > policy.reschedule_cap:
                cap = max(policy.retry_after_cap, policy.reschedule_cap)
                reason = f"Retry-After asks for {_seconds(wait)}, more than the {cap:g} s cap"
                return Plan("rate_limited", wait, reason)
            return self.rate_limited(wait, f"Retry-After asks for {_seconds(wait)}")
        if last:
            # Still throttled after every retry: a 429 always, a 503 when it says
            # how long (without a Retry-After a 503 is an ordinary server error).
            # Only a server that said when to come back gets a later try: without
            # a Retry-After, more rounds of retries would only hammer it.
            if status == 429 and wait is None:
                return Plan("rate_limited", 0.0, f"Still 429 after {attempt + 1} attempts")
            if status == 429 or (status == 503 and wait is not None and policy.reschedule_cap > 0):
                pause = max(wait, policy.rate_limited_pause)
                return self.rate_limited(pause, f"Still {status} after {attempt + 1} attempts")
            return FINAL
        delay = max(wait or 0.0, self.backoff(attempt))
        if time.monotonic() + delay >= budget_end:
            # As on the last attempt, a 503 without a Retry-After is an ordinary server error.
            if status == 429 and wait is None:
                return Plan("rate_limited", delay, "Retrying would exceed the fetch budget")
            if throttled and wait is not None:
                return self.rate_limited(delay, "Waiting as asked would exceed the fetch budget")
            return FINAL
        return Plan("retry", delay)

    def rate_limited(self, wait: float, reason: str) -> Plan:
        """RATE_LIMITED, carrying ``wait`` as the retry time when the caller can reschedule that far."""
        retry_after = wait if wait <= self.policy.reschedule_cap else None
        return Plan("rate_limited", wait, reason, retry_after)

    def backoff(self, attempt: int) -> float:
        # Exponential with "equal jitter": half fixed, half random, so retries
        # from many pages do not arrive at the server in lockstep.
        ceiling = min(self.policy.backoff_cap, self.policy.backoff_base * 2**attempt)
        return ceiling / 2 + self.random.uniform(0, ceiling / 2)


_DIGITS = re.compile(r"[0-9]+")


def parse_retry_after(value: str | None, now: float, server_date: str | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), or None.

    An HTTP-date is measured from the response's own Date header when it has a
    usable one, so a server whose clock is off by minutes still gets the wait
    it meant; otherwise from ``now``.
    """
    if not value:
        return None
    value = value.strip()
    if _DIGITS.fullmatch(value):
        return float(value) if len(value) <= 12 else math.inf
    when = _http_date(value)
    if when is None:
        return None
    sent = _http_date(server_date)
    return max(0.0, when - (sent if sent is not None else now))


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value.strip()).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _seconds(value: float) -> str:
    return "forever" if math.isinf(value) else f"{value:.0f} s"

"""The rolling, self-adjusting concurrency window over a list of work items.

``run_window`` starts items the moment a slot frees up (no waiting for a whole
batch), keeps the number in flight between a floor and a cap that move with the
health of recent results (halve on trouble, grow by one after a run of clean
ones, the AIMD rule TCP uses), limits how many run at once per host, spaces
starts per host for a requests-per-second rate or a robots.txt Crawl-delay, and
stops starting new items at a soft deadline, handing back the ones it never
started. A ``refill`` callback, asked while the last few items are starting,
can hand it more, so the window stays full across what would otherwise be the
end of one list of work and the start of the next. Items a caller puts in a
side lane (``crawler.side_lane``: an audit's external checks) run beside the
window, in slots of their own, and say nothing about its size.

Results go to a *sink* in sub-batches while work goes on: one consumer task
calls the sink, so sink calls never overlap and keep arrival order; the queue
in front of it is bounded, so a slow sink pauses new starts (back-pressure)
instead of letting results pile up in memory.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from crawler.alarm import Alarm, wait_for_wake
from crawler.share import Share
from crawler.side_lane import SideLane, SideQueue
from crawler.types import FetchError, FetchResult

T = TypeVar("T")
R = TypeVar("R")

HEALTH_OK = "ok"
HEALTH_SLOW = "slow"
HEALTH_ERROR = "error"
HEALTH_THROTTLED = "throttled"

# Full batches that may wait for the sink before new starts pause. Two lets
# the next batch be ready the moment the sink returns, without letting a slow
# sink make memory grow with the crawl.
_SINK_QUEUE_BATCHES = 2

# Fetch outcomes that say something about the server's load or reachability.
# Refusals decided on our side (robots, SSRF, traps, bad URLs) say nothing
# about how the server copes, so they count as clean for the window.
_LOAD_ERRORS = frozenset({
    FetchError.DNS_FAILURE, FetchError.CONNECT_FAILED, FetchError.CONNECT_TIMEOUT, FetchError.READ_TIMEOUT,
    FetchError.DEADLINE_EXCEEDED, FetchError.TLS_ERROR, FetchError.PROTOCOL_ERROR, FetchError.INCOMPLETE_BODY,
    FetchError.UNKNOWN,
})


@dataclass(frozen=True)
class WindowPolicy:
    """How the window moves. ``rate`` and ``crawl_delay`` space starts per host."""

    floor: int = 2
    start: int = 4
    cap: int = 16
    per_host: int = 8
    rate: float | None = None  # requests per second per host
    crawl_delay: float = 0.0  # seconds between starts on one host
    # The first start on a host waits a spacing too (a chunk follows requests it did not time).
    spaced_from_start: bool = False
    slow_seconds: float = 2.0
    large_bytes: int = 2_000_000
    # Consecutive clean results needed before the window grows by one.
    grow_after: int = 4

    def __post_init__(self) -> None:
        if self.floor < 1 or self.cap < self.floor:
            raise ValueError(f"window needs 1 <= floor <= cap, got {self.floor}..{self.cap}")
        if self.per_host < 1:
            raise ValueError("per_host must be at least 1")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be positive when set")
        if self.crawl_delay < 0:
            raise ValueError("crawl_delay cannot be negative")

    @property
    def spacing(self) -> float:
        """Minimum seconds between two starts on one host."""
        by_rate = 1.0 / self.rate if self.rate else 0.0
        return max(by_rate, self.crawl_delay)


@dataclass
class WindowReport(Generic[T]):
    """What a run did: ``unfinished`` holds the items never started, in input order."""

    done: int
    unfinished: list[T]
    peak: int  # the largest window size reached
    final: int  # the window size when the run ended
    max_in_flight: int = 0
    shrinks: int = 0
    health: dict[str, int] = field(default_factory=dict)


def fetch_health(result: FetchResult, policy: WindowPolicy) -> str:
    """Classify one fetch for the window: throttled, error, slow or ok.

    4xx answers are the site's content, not its load, so they are clean; 5xx
    and network failures mean the server is struggling; 429 and 503 (or a
    retry budget spent on them) mean it asked us to slow down.
    """
    if result.error is FetchError.RATE_LIMITED or result.status in (429, 503):
        return HEALTH_THROTTLED
    if result.error in _LOAD_ERRORS or (result.status is not None and result.status >= 500):
        return HEALTH_ERROR
    if result.elapsed > policy.slow_seconds or result.size > policy.large_bytes:
        return HEALTH_SLOW
    return HEALTH_OK


def fetch_pause(result: FetchResult) -> float:
    """Seconds a fetch's host asked us to leave it alone: a RATE_LIMITED result's Retry-After, else 0.

    The fetcher sets ``retry_after`` only for a wait within its policy's
    ``reschedule_cap``, so the pause has that bound; a shorter wait was slept
    inside the fetch, and a longer one gave the URL up.
    """
    if result.error is FetchError.RATE_LIMITED and result.retry_after:
        return result.retry_after
    return 0.0


class _Window:
    """The AIMD size: halve on trouble, +1 after ``grow_after`` clean results.

    A shrink only counts for work started after the previous shrink, so one
    burst of failures already in flight halves the window once, not once per
    failure (TCP's one-reduction-per-round-trip rule).
    """

    def __init__(self, policy: WindowPolicy) -> None:
        self.policy = policy
        self.size = min(max(policy.start, policy.floor), policy.cap)
        self.peak = self.size
        self.streak = 0
        self.shrinks = 0
        self.epoch = 0  # bumped on every shrink

    def record(self, health: str, started_epoch: int) -> None:
        if health == HEALTH_OK:
            self.streak += 1
            if self.streak >= self.policy.grow_after and self.size < self.policy.cap:
                self.size += 1
                self.peak = max(self.peak, self.size)
                self.streak = 0
            return
        self.streak = 0
        if started_epoch == self.epoch:
            smaller = max(self.policy.floor, self.size // 2)
            self.shrinks += smaller < self.size
            self.size = smaller
            self.epoch += 1


_DONE = object()  # tells the sink consumer that no more batches come


async def _consume(
    queue: asyncio.Queue, sink: Callable[[list], Awaitable[None]], wake: asyncio.Event
) -> None:
    """Feed batches to the sink one at a time, in order, until told to stop."""
    while True:
        batch = await queue.get()
        if batch is _DONE:
            return
        # The scheduler may be paused on a full queue; a get frees a place.
        wake.set()
        await sink(batch)
        wake.set()


# The most items a refill is asked ahead of need, whatever its latency. With
# one answer on its way, the caller holds at most this many unstarted items
# plus that answer and what runs (an audit's chunk re-runs all it held, one
# URL at a time, after a crash).
REFILL_LEAD_MAX = 512


def next_refill_lead(lead: int, used: int, window_size: int) -> int:
    """How few waiting items should prompt the next refill, after one whose wait used ``used``.

    Twice what the last wait used: when the window ran dry meanwhile, ``used``
    was everything that waited, so the lead doubles until an answer comes in
    time; once it does, the lead settles at twice the items the window starts
    in one refill's latency. It falls by at most a quarter an answer: latency
    has two modes for the audit (a top-up queued behind a sub-batch write, or
    not), and one quick answer says little about the next. Never below two
    windows (the ask also checks the window's size then), never above
    REFILL_LEAD_MAX. A fixed lead left the window empty while a top-up was
    queued behind a sub-batch write.
    """
    return max(2 * window_size, min(REFILL_LEAD_MAX, max(2 * used, lead * 3 // 4)))


# Side-lane items that may wait before refills pause. Refills follow the
# window's own work, so a side lane slower than the pages (external checks
# behind failing DNS) would otherwise gather every side item a refill brings;
# past this, the pages wait for the lane instead of memory growing.
SIDE_BACKLOG_MAX = 4 * REFILL_LEAD_MAX


async def run_window(
    items: Sequence[T],
    work: Callable[[T], Awaitable[R]],
    sink: Callable[[list[R]], Awaitable[None]],
    *,
    policy: WindowPolicy,
    host_of: Callable[[T], str],
    health_of: Callable[[R], str],
    soft_deadline: float | None = None,
    batch_size: int = 50,
    max_batch_wait: float | None = 1.0,
    refill: Callable[[], Awaitable[Sequence[T]]] | None = None,
    weight_of: Callable[[R], int] | None = None,
    side_lane: SideLane | None = None,
    in_side_lane: Callable[[T], bool] | None = None,
    share: Share | None = None,
    pause_of: Callable[[R], float] | None = None,
    paused_until: Mapping[str, float] | None = None,
) -> WindowReport[T]:
    """Run ``work`` over ``items`` through the window and feed results to ``sink``.

    1. Items queue per host, in input order. A start needs a free window slot,
       a free per-host slot, the host's spacing elapsed (for its first start too
       with ``spaced_from_start``, up to nine tenths of the time to the soft
       deadline), no back-pressure from the sink and the soft deadline (a
       ``time.monotonic()`` value) not passed.
    2. Each settled item feeds the window's health and joins the pending
       batch; a batch goes to the sink when it holds ``batch_size`` results
       (or results whose ``weight_of`` adds up to it: a costly result can
       count for more than a cheap one) or its oldest result has waited
       ``max_batch_wait`` seconds (None: size only).
    3. After the deadline nothing new starts; work in flight finishes (it has
       its own per-request deadline), the last partial batch is flushed, and
       the unstarted items come back in ``unfinished``.
    4. With ``refill``: once no more items wait to start than the refill lead,
       and before the deadline, ``refill()`` runs (one call at a time, beside
       the work) and what it returns queues behind the rest. The lead is at
       least twice what the window holds and follows the refill's own latency
       (see ``next_refill_lead``), so the window does not run dry while an answer
       is on its way. An empty answer means there is no more, and it is not
       asked again; but one that comes while more than two windows' worth
       still wait is asked once more when the window is nearly out of work
       (what runs meanwhile may give the refill more: for the audit, the URLs
       its results add to the frontier).

    5. With ``side_lane``: items ``in_side_lane`` says are its own start in
       the lane's slots, at most its ``per_host`` at once per host, beside
       the window and unspaced. Their results go to the sink like the rest but
       never move the window, and they do not count toward the refill lead;
       refills pause while SIDE_BACKLOG_MAX of them wait.
    6. With ``share``: never more than its ``limit`` in the window, and each
       host's spacing ``parts`` times longer (the audit's other chunks space
       theirs too); what runs is written back to its ``in_flight``.
    7. With ``pause_of``: a result of the window's own for which it gives
       seconds (``fetch_pause``: the site's Retry-After) holds every new start
       on its host for that long, as its spacing does; other hosts and the side
       lane go on, and past the soft deadline what it held comes back in
       ``unfinished``. ``paused_until`` (host: ``time.monotonic()`` value)
       holds hosts from the first start the same way: a pause an earlier run
       was asked for (for the audit, its previous chunk's Retry-After). It is
       read again before each round of starts, so another thread may raise a
       host's value while the run goes on (for the audit, a pause a chunk
       running beside this one was given). A host paused until the soft
       deadline or later can start nothing more: its waiting items come back in
       ``unfinished`` at once, whatever it is given later goes the same way, and
       ``refill`` is not asked again (what it brings would mostly wait too).

    ``work`` is expected not to raise for anything the site does (the fetcher
    turns faults into results). If it, ``refill`` or the sink raises, work in
    flight is cancelled and awaited, then the exception propagates; completed
    results still queued are handed to the sink first when the failure was in
    work or refill.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if (side_lane is None) != (in_side_lane is None):
        raise ValueError("side_lane and in_side_lane go together")
    window = _Window(policy)
    lane: SideQueue[T] | None = SideQueue(side_lane) if side_lane is not None else None

    # Per-host queues of (input index, item); dict order gives round-robin.
    waiting: dict[str, deque[tuple[int, T]]] = {}
    queued_count = 0

    def enqueue(more: Sequence[T]) -> None:
        nonlocal queued_count
        for item in more:
            if lane is not None and in_side_lane(item):
                lane.add(host_of(item), (queued_count, item))
            else:
                waiting.setdefault(host_of(item), deque()).append((queued_count, item))
            queued_count += 1

    enqueue(items)
    refilling: asyncio.Task | None = None
    refilled_all = refill is None
    refill_lead = 2 * window.size
    asked_again = False  # after an early empty answer (point 4 above)
    started_total = 0  # items started so far, to measure what a refill's wait used up
    started_at_ask = 0
    host_running: dict[str, int] = {}
    host_next_start: dict[str, float] = {}
    began = time.monotonic()
    opening = began + policy.spacing * (max(1, share.parts) if share is not None else 1) \
        if policy.spaced_from_start else 0.0
    if opening and soft_deadline is not None:  # a chunk shorter than a spacing still starts one item
        opening = min(opening, began + 0.9 * (soft_deadline - began))
    # When each host's pause ends (point 7). Unlike the opening spacing, it is never cut short by the deadline.
    paused: dict[str, float] = {}

    def pause(host: str, resume: float) -> None:
        if resume > paused.get(host, 0.0):
            paused[host] = resume
            host_next_start[host] = max(host_next_start.get(host, opening), resume)

    wake = asyncio.Event()
    alarm = Alarm(wake)
    settled: deque[tuple[asyncio.Task, int, str, bool]] = deque()
    running: set[asyncio.Task] = set()
    queue: asyncio.Queue = asyncio.Queue(maxsize=_SINK_QUEUE_BATCHES)
    consumer = asyncio.create_task(_consume(queue, sink, wake))
    # The consumer ending (a sink exception) must wake the scheduler too.
    consumer.add_done_callback(lambda _task: wake.set())
    batch: list[R] = []
    batch_weight = 0
    batch_started = 0.0
    done = 0
    max_in_flight = 0
    health_counts: dict[str, int] = {}
    unfinished_indexed: list[tuple[int, T]] = []

    def start(host: str, item: T, side: bool = False) -> None:
        nonlocal started_total
        started_total += 1
        task = asyncio.ensure_future(work(item))
        epoch = window.epoch
        running.add(task)
        if not side:  # the lane counts its own (SideQueue.take)
            host_running[host] = host_running.get(host, 0) + 1

        def settle(t: asyncio.Task) -> None:
            settled.append((t, epoch, host, side))
            wake.set()

        task.add_done_callback(settle)

    def full() -> int:
        """How many results from the front of the batch make a full sub-batch (0: none yet)."""
        if batch_weight < batch_size:
            return 0
        if weight_of is None:
            return batch_size
        total = 0
        for count, result in enumerate(batch, 1):
            total += weight_of(result)
            if total >= batch_size:
                return count
        return len(batch)

    def flush(force: bool) -> bool:
        """Move the batch into the sink queue if due; False when the queue is full."""
        nonlocal batch, batch_weight
        if not batch:
            return True
        cut = full()
        due = (
            force
            or cut > 0
            or (max_batch_wait is not None and time.monotonic() - batch_started >= max_batch_wait)
        )
        if not due:
            return True
        if queue.full():
            return False
        cut = cut or len(batch)
        queue.put_nowait(batch[:cut])
        batch = batch[cut:]
        batch_weight = len(batch) if weight_of is None else sum(map(weight_of, batch))
        return True

    async def cancel_running() -> None:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        running.clear()

    def waiting_count() -> int:
        return sum(len(queued) for queued in waiting.values())

    failure: BaseException | None = None
    try:
        while True:
            if consumer.done():
                # The sink raised (it only returns early on _DONE, never sent yet).
                await cancel_running()
                consumer.result()
                raise RuntimeError("sink consumer stopped unexpectedly")

            # 1. Account for settled work.
            while settled:
                task, epoch, host, side = settled.popleft()
                running.discard(task)
                if side:
                    lane.settled(host)
                else:
                    host_running[host] -= 1
                if task.cancelled():
                    continue
                exc = task.exception()
                if exc is not None:
                    failure = failure or exc
                    continue
                result = task.result()
                if not side:  # the window judges the site by the site's own results
                    health = health_of(result)
                    health_counts[health] = health_counts.get(health, 0) + 1
                    window.record(health, epoch)
                    # A 429 asks the host to be left alone, not just that URL: the rest of
                    # its items would each earn a 429 of their own while it waits.
                    asked = pause_of(result) if pause_of is not None else 0.0
                    if asked > 0:
                        pause(host, time.monotonic() + asked)
                if not batch:
                    batch_started = time.monotonic()
                batch.append(result)
                batch_weight += 1 if weight_of is None else weight_of(result)
                done += 1
            if refilling is not None and refilling.done():
                finished, refilling = refilling, None
                if finished.cancelled():
                    refilled_all = True  # cancelled from outside: ask no more
                elif finished.exception() is not None:
                    failure = failure or finished.exception()
                else:
                    more = finished.result()
                    if more:
                        refill_lead = next_refill_lead(refill_lead, started_total - started_at_ask, window.size)
                        asked_again = False
                    elif asked_again or waiting_count() <= 2 * window.size:
                        refilled_all = True
                    else:
                        asked_again = True
                        refill_lead = 2 * window.size
                    if soft_deadline is not None and time.monotonic() >= soft_deadline:
                        unfinished_indexed.extend((queued_count + i, item) for i, item in enumerate(more))
                        queued_count += len(more)
                    else:
                        enqueue(more)
            if failure is not None:
                break

            # 2. Hand due batches to the sink; a full queue is back-pressure.
            while full() and flush(False):
                pass
            pressured = full() > 0
            if not pressured:
                flush(False)

            # 3. Start what the window, hosts, spacing, pauses and deadline allow.
            for host, resume in list((paused_until or {}).items()):  # a copy: another thread may write it
                pause(host, resume)
            now = time.monotonic()
            past_deadline = soft_deadline is not None and now >= soft_deadline
            if soft_deadline is not None and not past_deadline:
                # Held past the deadline: sleeping until it would only keep the worker idle.
                for host in [host for host in waiting if paused.get(host, 0.0) >= soft_deadline]:
                    unfinished_indexed.extend(waiting.pop(host))
                    refilled_all = True
            next_timer: float | None = None
            size, spacing = window.size, policy.spacing
            if share is not None:
                size, spacing = min(size, share.limit), spacing * max(1, share.parts)
            # Asked while enough still waits to cover the answer's latency (for
            # the audit, a database transaction queued behind a write).
            if (not refilled_all and refilling is None and not past_deadline
                    and waiting_count() <= max(refill_lead, 2 * window.size)
                    and (lane is None or lane.queued < SIDE_BACKLOG_MAX)):
                started_at_ask = started_total
                refilling = asyncio.ensure_future(refill())
                refilling.add_done_callback(lambda _task: wake.set())
            if past_deadline:
                for queued in waiting.values():
                    unfinished_indexed.extend(queued)
                waiting.clear()
                if lane is not None:
                    unfinished_indexed.extend(lane.drain())
            elif not pressured:
                # The window's slots are for its own items: the lane's run beside them.
                in_window = len(running) - (lane.running if lane is not None else 0)
                for host in list(waiting):
                    if in_window >= size:
                        break
                    queued = waiting[host]
                    while queued and in_window < size:
                        if host_running.get(host, 0) >= policy.per_host:
                            break
                        not_before = host_next_start.get(host, opening)
                        if not_before > now:
                            next_timer = (
                                not_before if next_timer is None else min(next_timer, not_before)
                            )
                            break
                        _, item = queued.popleft()
                        start(host, item)
                        in_window += 1
                        if spacing:
                            host_next_start[host] = now + spacing
                    if not queued:
                        del waiting[host]
                max_in_flight = max(max_in_flight, in_window)
                if share is not None:
                    share.in_flight = in_window
                    if waiting and size < window.size:  # held back by the share: look again soon
                        next_timer = now + 0.5 if next_timer is None else min(next_timer, now + 0.5)
                if lane is not None and lane.queued:
                    for host, item in lane.take():
                        start(host, item, side=True)

            # 4. Finished when nothing runs, nothing is left to start and no
            # refill is on its way.
            if not running and not waiting and not (lane is not None and lane.queued) and refilling is None:
                while batch:
                    if not flush(True):
                        await wait_for_wake(wake, consumer)
                        if consumer.done():
                            break
                if not batch:
                    break
                continue

            # 5. Sleep until something settles, the sink frees a place, a
            # host's spacing elapses, a batch gets old or the deadline passes.
            timers = [next_timer]
            if soft_deadline is not None and (waiting or (lane is not None and lane.queued)):
                timers.append(soft_deadline)
            # An old batch with no room in the queue waits for the consumer's
            # wake-up (it sets the event when it takes a batch): its timer would
            # already be past, and waking at once for it spun the loop on the CPU.
            if batch and max_batch_wait is not None and not queue.full():
                timers.append(batch_started + max_batch_wait)
            wake_at = min((t for t in timers if t is not None), default=None)
            await wait_for_wake(wake, consumer, alarm, wake_at)

        if failure is not None:
            # A bug in work: keep the results that did complete, then raise.
            await cancel_running()
            while batch and not consumer.done():
                if not flush(True):
                    await wait_for_wake(wake, consumer)
            await _finish(queue, consumer, wake)
            raise failure

        await _finish(queue, consumer, wake)
    finally:
        alarm.disarm()
        if running:
            await cancel_running()
        if refilling is not None and not refilling.done():
            refilling.cancel()
            await asyncio.gather(refilling, return_exceptions=True)
        if not consumer.done():
            consumer.cancel()
            await asyncio.gather(consumer, return_exceptions=True)

    unfinished_indexed.sort(key=lambda pair: pair[0])
    return WindowReport(
        done=done,
        unfinished=[item for _, item in unfinished_indexed],
        peak=window.peak,
        final=window.size,
        max_in_flight=max_in_flight,
        shrinks=window.shrinks,
        health=health_counts,
    )


async def _finish(queue: asyncio.Queue, consumer: asyncio.Task, wake: asyncio.Event) -> None:
    """Tell the consumer to stop once the queued batches are through; re-raise its error."""
    while not consumer.done():
        if not queue.full():
            queue.put_nowait(_DONE)
            break
        await wait_for_wake(wake, consumer)
    await consumer

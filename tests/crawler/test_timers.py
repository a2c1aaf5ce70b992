"""crawler.timers: fixed-delay timers on one loop timer, and a deadline with asyncio.timeout's semantics."""

from __future__ import annotations

import asyncio
import time

import pytest

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.timers import Deadline, TimerQueue
from crawler.window import WindowPolicy, run_window
from tests.crawler.hostile_server import respond


class CountingLoop(asyncio.SelectorEventLoop):
    """asyncio's loop, counting the timers it is asked for."""

    timers = 0

    def call_at(self, when, callback, *args, context=None):
        self.timers += 1
        return super().call_at(when, callback, *args, context=context)


def _run(coroutine):
    loop = CountingLoop()
    try:
        return loop.run_until_complete(coroutine), loop.timers
    finally:
        loop.close()


def test_timers_run_in_order_after_their_delay_and_cancelled_ones_never_run():
    async def scenario():
        queue = TimerQueue(0.05)
        ran: list[str] = []
        started = time.monotonic()
        first = queue.call_later(ran.append, "first")
        cancelled = queue.call_later(ran.append, "cancelled")
        queue.call_later(ran.append, "third")
        TimerQueue.cancel(cancelled)
        await asyncio.sleep(0.02)
        assert ran == []
        await asyncio.sleep(0.1)
        assert first[1] is None  # spent entries hold no callback
        return ran, time.monotonic() - started

    (ran, elapsed), _timers = _run(scenario())
    assert ran == ["first", "third"]
    assert elapsed >= 0.05


def test_a_queue_uses_one_loop_timer_for_many_timers_and_keeps_no_cancelled_backlog():
    async def scenario():
        queue = TimerQueue(10.0)
        for _ in range(1000):
            TimerQueue.cancel(queue.call_later(print))
        return len(queue._entries)

    backlog, timers = _run(scenario())
    assert backlog <= 1
    assert timers == 1


def test_a_queue_moves_to_a_new_loop_instead_of_timing_on_a_closed_one():
    queue = TimerQueue(0.01)
    for _ in range(2):
        ran: list[int] = []

        async def scenario(ran=ran):
            queue.call_later(ran.append, 1)
            await asyncio.sleep(0.05)

        _run(scenario())
        assert ran == [1]


def test_a_deadline_that_passes_raises_timeout_error_and_one_that_does_not_changes_nothing():
    async def scenario():
        with pytest.raises(TimeoutError):
            with Deadline(TimerQueue(0.02)):
                await asyncio.sleep(1)
        with Deadline(None, asyncio.get_running_loop().time() + 0.02):
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)  # a spent deadline must not cancel what runs after it
        return asyncio.current_task().cancelling()

    cancelling, _ = _run(scenario())
    assert cancelling == 0


def test_a_cancel_from_outside_passes_through_a_deadline_as_a_cancellation():
    async def inner(started: asyncio.Event):
        with Deadline(TimerQueue(5.0)):
            started.set()
            await asyncio.sleep(5)

    async def scenario():
        started = asyncio.Event()
        task = asyncio.ensure_future(inner(started))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _run(scenario())


def test_an_outer_timeout_that_fires_first_stays_the_outer_one():
    async def scenario():
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.02):
                with Deadline(TimerQueue(5.0)):
                    await asyncio.sleep(1)
        return asyncio.current_task().cancelling()

    cancelling, _ = _run(scenario())
    assert cancelling == 0


def test_the_window_scheduler_keeps_its_wake_up_timer_while_the_time_stays_the_same():
    async def work(item: int) -> int:
        await asyncio.sleep(0)
        return item

    async def sink(batch):
        await asyncio.sleep(0)

    async def scenario():
        await run_window(list(range(400)), work, sink, policy=WindowPolicy(floor=16, start=16, cap=16),
                         host_of=lambda item: "", health_of=lambda result: "ok", soft_deadline=time.monotonic() + 60,
                         batch_size=50, max_batch_wait=1.0)

    _, timers = _run(scenario())
    # A timer each sleep was 64 here; kept while the wake-up time stays, 4.
    assert timers < 16


def test_a_fetchers_reads_and_deadlines_share_a_few_loop_timers(server):
    async def ok(request, reader, writer, server) -> bool:
        return await respond(request, writer, server, body=b"<html></html>", keep_alive=True)

    server.route("/ok", ok)

    async def scenario():
        guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])
        async with Fetcher(FetchPolicy(), guard, concurrency=4) as fetcher:
            results = await asyncio.gather(*(fetcher.check(server.url("/ok")) for _ in range(200)))
        return [result.status for result in results]

    statuses, timers = _run(scenario())
    assert statuses == [200] * 200
    # A read timeout and a deadline each request was 404 loop timers here; on queues, 6.
    assert timers < 50

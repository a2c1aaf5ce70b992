"""Timers of one fixed delay sharing one event-loop timer, and a deadline scope built on them.

Every socket read that has to wait sets a read timeout, and every request a
deadline: several timers a request, nearly all cancelled a few milliseconds
later. uvloop makes each one a libuv timer, ~4-5 us of CPU to create and
cancel (measured), about as much as parsing the response they guard. Timers
that all run the same ``delay`` after they are set expire in the order they
were set, so a queue of them needs one loop timer, for the oldest one still
live: setting one is an append, cancelling it a store.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

# uvloop's clock moves in whole milliseconds: a loop timer may run up to one
# early by the queue's reckoning, which would re-arm it for the same moment
# until the clock caught up. asyncio's own loop allows for its clock the same way.
_EARLY = 0.001


class TimerQueue:
    """``call_later`` for one fixed delay, on the running loop; ``cancel`` what it returns.

    Callbacks must not raise (they run inside the queue's own timer callback).
    Cancelled timers leave the queue as soon as they reach its front, so it
    holds what was set since the oldest live timer: at most the delay's worth.
    """

    __slots__ = ("delay", "_entries", "_handle", "_loop")

    def __init__(self, delay: float) -> None:
        self.delay = delay
        # [when, callback, args]; callback None once cancelled or run.
        self._entries: deque[list] = deque()
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def call_later(self, callback: Callable[..., object], *args: Any) -> list:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # First use, or a later loop (a test running one backend under
            # several asyncio.run calls): nothing set on another loop can run here.
            self._entries.clear()
            self._handle = None
            self._loop = loop
        entries = self._entries
        while entries and entries[0][1] is None:
            entries.popleft()
        entry = [loop.time() + self.delay, callback, args]
        entries.append(entry)
        if self._handle is None:
            self._handle = loop.call_at(entry[0], self._run)
        return entry

    @staticmethod
    def cancel(entry: list) -> None:
        entry[1] = entry[2] = None

    def _run(self) -> None:
        self._handle = None
        loop, entries = self._loop, self._entries
        now = loop.time() + _EARLY
        while entries:
            when, callback, args = entries[0]
            if callback is None:
                entries.popleft()
                continue
            if when > now:
                self._handle = loop.call_at(when, self._run)
                return
            entry = entries.popleft()
            entry[1] = entry[2] = None  # spent: holds nothing for the caller's reference to keep alive
            callback(*args)


class Deadline:
    """What ``async with asyncio.timeout_at(...)`` does, as a plain ``with``, on a TimerQueue.

    ``Deadline(queue)`` ends ``queue.delay`` seconds from now, on the queue;
    ``Deadline(None, when)`` at ``when`` (the loop's clock), on a loop timer
    of its own (a fetch near the end of its total budget, a body read that
    shares the head's deadline). Then the task running the block is cancelled
    and the block raises TimeoutError. A cancellation from elsewhere passes
    through as it is, counted the way ``asyncio.Timeout`` counts it
    (``Task.uncancel``), so a cancel of the crawl or an outer timeout still
    works.
    """

    __slots__ = ("_queue", "_when", "_task", "_cancelling", "_timer", "_fired")

    def __init__(self, queue: TimerQueue | None, when: float | None = None) -> None:
        if (queue is None) == (when is None):
            raise ValueError("a Deadline needs a queue or a time, not both")
        self._queue = queue
        self._when = when
        self._fired = False

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a Deadline must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        if self._queue is not None:
            self._timer = self._queue.call_later(self._expire)
        else:
            self._timer = asyncio.get_running_loop().call_at(self._when, self._expire)
        return self

    def _expire(self) -> None:
        self._fired = True
        self._task.cancel()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        timer = self._timer
        if isinstance(timer, list):
            TimerQueue.cancel(timer)
        else:
            timer.cancel()
        # As asyncio.Timeout does: the cancel this deadline requested is taken
        # back whatever ended the block; only a cancellation that was ours alone
        # becomes TimeoutError.
        if self._fired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc
        return None

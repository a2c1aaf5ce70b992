"""One crawl, two threads: the event loop on a helper thread, every database call on this one.

Django connections belong to the thread that opened them; keeping the writes on
the task's own thread means one connection, the caller's transaction semantics,
and no second SQLite writer competing for the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time

from django.conf import settings
from django.db import connections

from crawler import loop as crawl_loop

# How long an interrupted chunk waits for its crawl thread to unwind (cancelled
# tasks, closed sockets) before the exception goes on without it.
CRAWL_STOP_SECONDS = 10.0


class CrawlStop:
    """Cancels the crawl thread's main task from another thread, even before it has started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._task: asyncio.Task | None = None
        self._cancelled = False

    def started(self) -> None:
        """Called by the crawl's main task first thing: a cancel asked for already applies now."""
        with self._lock:
            self._task = asyncio.current_task()
            if self._cancelled:
                self._task.cancel()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._task is not None:
                try:
                    self._task.get_loop().call_soon_threadsafe(self._task.cancel)
                except RuntimeError:  # the loop has closed: the crawl is over anyway
                    pass


def run_with_db_here(make_coroutine, *, idle=None, idle_every: float | None = None):
    """Run an async crawl in a helper thread while every database call runs on this thread.

    Django connections belong to the thread that opened them; keeping the
    writes on the caller's thread means one connection, the caller's
    transaction semantics, and no second SQLite writer competing for the lock.
    The coroutine gets ``db(fn, *args)``, an awaitable that runs ``fn`` here.
    ``idle()`` runs here every ``idle_every`` seconds, between requests: the
    chunk's lease heartbeat. It keeps time whatever the traffic, since a stream
    of requests that do not extend the lease (top-ups) must not starve it.
    """
    requests: queue.SimpleQueue = queue.SimpleQueue()
    outcome: dict = {}
    stop = CrawlStop()

    async def db(fn, *args):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        requests.put((fn, args, future, loop))
        return await future

    async def crawl():
        stop.started()
        return await make_coroutine(db)

    def crawl_thread():
        try:
            outcome["value"] = crawl_loop.run(crawl())
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc
        finally:
            requests.put(None)

    thread = threading.Thread(target=crawl_thread, name="crawl-loop", daemon=True)
    try:
        thread.start()
        next_beat = time.monotonic() + idle_every if idle and idle_every else None
        while True:
            if next_beat is not None and time.monotonic() >= next_beat:
                idle()
                next_beat = time.monotonic() + idle_every
            try:
                request = requests.get(timeout=None if next_beat is None else max(0.0, next_beat - time.monotonic()))
            except queue.Empty:
                continue
            if request is None:
                break
            fn, args, future, loop = request
            if future.cancelled():
                continue  # its task is gone (a refill cancelled as the crawl ended): nobody wants the answer
            # A Ctrl-C inside ``fn`` stops the crawl from here, as one in the wait does (below): handed to
            # the task that asked, it would end the loop from inside that task and stay on it, unretrieved.
            try:
                value, error = fn(*args), None
            except Exception as exc:
                value, error = None, exc
            try:
                loop.call_soon_threadsafe(_settle, future, value, error)
            except RuntimeError:
                # The crawl ended and closed its loop while this ran: the answer
                # has nobody to go to, and the crawl's own outcome follows.
                pass
            if settings.DEBUG:
                forget_queries()
    except BaseException:
        # Ctrl-C lands here, in the wait for the next request or in a database call. The crawl thread
        # must unwind before the interpreter shuts down: a daemon thread still
        # inside the event loop or lxml at exit can crash the process.
        stop.cancel()
        with contextlib.suppress(RuntimeError):  # the thread never started
            thread.join(CRAWL_STOP_SECONDS)
        raise
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def forget_queries() -> None:
    """Empty the DEBUG query log of this thread's connections; one capturing queries on purpose keeps its own.

    With DEBUG on, Django keeps each connection's last 9,000 statements with
    their values spelled out (a sub-batch's IN lists run to kilobytes), and
    nothing in a chunk, a worker or the audit command ever reads or empties it.
    """
    for conn in connections.all(initialized_only=True):
        if not conn.force_debug_cursor:
            conn.queries_log.clear()


def _settle(future: asyncio.Future, value, error) -> None:
    if future.done():  # the awaiting task was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)

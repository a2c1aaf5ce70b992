"""A chunk's crawl thread: the event loop it runs on, and how an interrupt stops it."""

import asyncio
import gc
import signal
import sys
import threading
import time

import pytest

from audits.crawl.bridge import run_with_db_here


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop has no Windows build")
def test_a_chunk_crawls_on_uvloop_and_its_database_calls_still_run_on_the_callers_thread():
    import uvloop

    async def crawl(db):
        db_thread = await db(threading.get_ident)
        return type(asyncio.get_running_loop()), threading.get_ident(), db_thread

    loop_type, crawl_thread, db_thread = run_with_db_here(crawl)
    assert loop_type is uvloop.Loop
    assert db_thread == threading.get_ident() != crawl_thread


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


@pytest.fixture
def interrupt_caller():
    """A callable that makes Ctrl-C land in this (the caller's) thread, sent from any thread.

    SIGUSR1 aimed at this thread rather than SIGINT at the process: the kernel
    may hand a process signal to whichever thread it likes, and then the
    caller's wait is not interrupted until something else wakes it.
    """
    caller = threading.get_ident()
    previous = signal.signal(signal.SIGUSR1, _raise_interrupt)
    try:
        yield lambda: signal.pthread_kill(caller, signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _crawl_threads_alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "crawl-loop" and t.is_alive()]


def test_an_interrupt_while_the_crawl_runs_stops_the_crawl_thread_before_it_propagates(interrupt_caller):
    # Ctrl-C reaches the caller's thread while it waits for database requests.
    # A crawl thread left running was still in C code (uvloop, lxml) when the
    # interpreter shut down, and `manage.py audit` died of SIGSEGV, not 130.
    unwound = threading.Event()

    async def crawl(db):
        try:
            interrupt_caller()
            await asyncio.sleep(60)
        finally:
            unwound.set()

    with pytest.raises(KeyboardInterrupt):
        run_with_db_here(crawl)
    assert unwound.is_set()
    assert _crawl_threads_alive() == []


def test_an_interrupt_while_a_database_call_runs_still_ends_the_crawl_and_propagates(interrupt_caller, caplog):
    def slow_write():
        interrupt_caller()
        threading.Event().wait(0.5)  # the handler runs here, in the caller's thread
        return "written"

    async def crawl(db):
        # A task of its own writes, as a chunk's writer does, while the crawl's main task goes on.
        writing = asyncio.create_task(db(slow_write))
        await asyncio.sleep(60)
        await writing

    interrupted = False
    try:  # not pytest.raises, which would keep the exception, its frames and the task alive
        run_with_db_here(crawl)
    except KeyboardInterrupt:
        interrupted = True
    assert interrupted and _crawl_threads_alive() == []
    # Handed to the crawl's task, the interrupt was left on it, and asyncio printed it with its
    # traceback ("Task exception was never retrieved") under the command's exit code 130.
    gc.collect()
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def test_the_lease_heartbeat_keeps_time_while_database_requests_keep_coming():
    # A chunk's top-ups do not extend its lease; a stream of them, each sooner
    # than the beat interval, used to hold the heartbeat off until the lease
    # (three beats) ran out under a live worker.
    beats: list[float] = []

    async def crawl(db):
        loop = asyncio.get_running_loop()
        end = loop.time() + 1.0
        while loop.time() < end:
            await db(lambda: None)
            await asyncio.sleep(0.02)

    run_with_db_here(crawl, idle=lambda: beats.append(threading.get_ident()), idle_every=0.2)
    assert len(beats) >= 3
    assert set(beats) == {threading.get_ident()}  # on the caller's thread, with its connection


@pytest.mark.django_db
def test_with_debug_on_the_crawls_statements_leave_no_query_log_behind_unless_captured(settings):
    # DEBUG keeps each connection's last 9,000 statements, values spelled out;
    # nothing in a crawl reads them, so a long audit would hold them all.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from audits.models import Audit

    settings.DEBUG = True

    async def crawl(db):
        for _ in range(3):
            await db(lambda: Audit.objects.filter(pk__in=list(range(500))).count())

    connection.queries_log.clear()
    run_with_db_here(crawl)
    assert len(connection.queries_log) == 0

    with CaptureQueriesContext(connection) as queries:
        run_with_db_here(crawl)
    assert len(queries.captured_queries) == 3


def test_a_database_answer_the_ended_crawl_no_longer_waits_for_is_dropped():
    inside = threading.Event()

    def refusal():
        inside.set()
        time.sleep(0.3)  # the crawl ends and closes its loop meanwhile
        raise LookupError("a top-up refused after the crawl ended")

    async def crawl(db):
        late = asyncio.ensure_future(db(refusal))
        while not inside.is_set():
            await asyncio.sleep(0.01)
        late.cancel()  # as the window cancels a refill when it stops
        return "the crawl's own result"

    assert run_with_db_here(crawl) == "the crawl's own result"


def test_a_database_call_cancelled_before_it_ran_is_not_run():
    ran: list[str] = []

    async def crawl(db):
        first = asyncio.ensure_future(db(time.sleep, 0.2))
        await asyncio.sleep(0.05)  # the caller's thread is inside the first call
        second = asyncio.ensure_future(db(ran.append, "the second call"))
        await asyncio.sleep(0)
        second.cancel()
        await first
        return ran

    assert run_with_db_here(crawl) == []

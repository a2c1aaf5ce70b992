"""A chunk's crawl thread: the event loop it runs on and the GC thresholds both threads run under."""

import asyncio
import gc
import sys
import threading

import pytest

from audits.crawling import run_with_db_here
from crawler.gcpolicy import CRAWL_THRESHOLDS


def test_a_chunk_runs_under_raised_gc_thresholds_and_restores_them():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        async def crawl(db):
            on_db_thread = await db(gc.get_threshold)
            return gc.get_threshold(), on_db_thread

        assert run_with_db_here(crawl) == (CRAWL_THRESHOLDS, CRAWL_THRESHOLDS)
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*saved)


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop has no Windows build")
def test_a_chunk_crawls_on_uvloop_and_its_database_calls_still_run_on_the_callers_thread():
    import uvloop

    async def crawl(db):
        db_thread = await db(threading.get_ident)
        return type(asyncio.get_running_loop()), threading.get_ident(), db_thread

    loop_type, crawl_thread, db_thread = run_with_db_here(crawl)
    assert loop_type is uvloop.Loop
    assert db_thread == threading.get_ident() != crawl_thread

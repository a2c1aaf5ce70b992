"""A chunk's crawl loop and its database thread run under the crawl's GC thresholds."""

import gc

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

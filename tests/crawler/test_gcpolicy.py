"""The collector's thresholds are raised while crawls run and restored after the last one."""

import asyncio
import gc
import threading

import pytest

from crawler.crawl import CrawlLimits, crawl_site
from crawler.gcpolicy import CRAWL_THRESHOLDS, crawl_gc
from tests.crawler.hostile_server import HostileServer, static


@pytest.fixture
def default_thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield (700, 10, 10)
    gc.set_threshold(*saved)


def test_thresholds_are_raised_inside_and_restored_after(default_thresholds):
    with crawl_gc():
        assert gc.get_threshold() == CRAWL_THRESHOLDS
    assert gc.get_threshold() == default_thresholds


def test_overlapping_crawls_restore_only_when_the_last_one_ends(default_thresholds):
    outer_done, inner_started = threading.Event(), threading.Event()
    seen = []

    def inner():
        with crawl_gc():
            inner_started.set()
            outer_done.wait(5)
            seen.append(gc.get_threshold())  # the outer crawl has ended, this one has not

    thread = threading.Thread(target=inner)
    with crawl_gc():
        thread.start()
        inner_started.wait(5)
    outer_done.set()
    thread.join(5)
    assert seen == [CRAWL_THRESHOLDS]
    assert gc.get_threshold() == default_thresholds


def test_higher_thresholds_someone_set_are_never_lowered():
    saved = gc.get_threshold()
    gc.set_threshold(100_000, 10, 500)
    try:
        with crawl_gc():
            assert gc.get_threshold() == (100_000, 50, 500)
        assert gc.get_threshold() == (100_000, 10, 500)
    finally:
        gc.set_threshold(*saved)


def test_a_crawl_runs_under_the_raised_thresholds_and_puts_them_back(default_thresholds):
    seen = []
    with HostileServer() as server:
        server.route("/", static(b"<!doctype html><title>t</title><p>hi</p>"))
        asyncio.run(crawl_site(server.url("/"), CrawlLimits(allow_private=True, max_pages=2),
                               on_page=lambda outcome: seen.append(gc.get_threshold())))
    assert seen and all(t == CRAWL_THRESHOLDS for t in seen)
    assert gc.get_threshold() == default_thresholds

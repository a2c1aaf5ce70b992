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


@pytest.fixture
def collector_state(monkeypatch):
    from crawler import gcpolicy

    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    monkeypatch.setattr(gcpolicy, "_startup_saved", None)
    yield gcpolicy
    if not frozen:
        gc.unfreeze()  # this process froze nothing before the test: leave it so
    gc.set_threshold(*thresholds)


def test_startup_raises_the_thresholds_and_resume_freezes_what_it_made_and_puts_them_back(collector_state):
    gcpolicy = collector_state
    gc.set_threshold(700, 10, 10)
    gcpolicy.hold_back_for_startup()
    assert gc.get_threshold() == gcpolicy.STARTUP_THRESHOLDS
    assert gc.isenabled()  # held back, not off: a process whose apps never get ready still collects
    made_at_startup = [[] for _ in range(1000)]  # tracked containers, like modules' and classes' dicts
    before = gc.get_freeze_count()
    gcpolicy.put_back_after_startup()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() >= before + len(made_at_startup)


def test_resume_does_nothing_unless_startup_raised_the_thresholds(collector_state):
    gcpolicy = collector_state
    # A process started without manage.py (pytest, a WSGI server) gets no freeze
    # and keeps the thresholds it has.
    gc.set_threshold(900, 20, 30)
    fresh = [[] for _ in range(1000)]  # tracked, so a freeze would count them
    before = gc.get_freeze_count()
    gcpolicy.put_back_after_startup()
    # Not ==: a frozen object may be freed meanwhile (the count then drops by it).
    assert gc.get_threshold() == (900, 20, 30) and gc.get_freeze_count() < before + len(fresh)


def test_holding_back_twice_keeps_the_thresholds_the_first_hold_saved(collector_state):
    gcpolicy = collector_state
    gc.set_threshold(700, 10, 10)
    gcpolicy.hold_back_for_startup()
    gcpolicy.hold_back_for_startup()
    gcpolicy.put_back_after_startup()
    assert gc.get_threshold() == (700, 10, 10)


def test_manage_py_puts_the_collector_back_once_started_with_startup_frozen(tmp_path):
    import os
    import subprocess

    from tests.conftest import MANAGE, ROOT

    code = "import gc; print('collector', gc.get_threshold()[0], gc.get_freeze_count())"
    done = subprocess.run(MANAGE + ["shell", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SECRET_KEY": "test",
                               "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"})
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("collector ")]
    _, threshold, frozen = line.split()
    # Django, the apps and the admin make tens of thousands of objects.
    assert threshold == "700" and int(frozen) > 20_000  # CPython's default, put back

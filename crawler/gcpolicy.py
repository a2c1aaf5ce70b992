"""Fewer cyclic garbage collections while a crawl runs.

A crawl allocates a few hundred thousand short-lived container objects a
second (link records, dicts, tuples), nearly all freed by reference counting
the moment a page is done; with CPython's default threshold of 700 the young
generation is collected thousands of times a second for almost nothing, and
every tenth collection also walks the older generations, which grow with the
process's caches. Measured on the 2,000-page benchmark corpus
(``crawl_site``, interleaved runs in one process): collections took 0.40-0.47 s
of 7.3-7.9 s CPU with the defaults, none with the thresholds below, and pages
per second rose 14-22%; a young collection every 50,000 allocations still
reclaims cycles long before they matter for memory.

The thresholds are process-wide, so they are raised while at least one crawl
runs here and put back when the last one ends.

Start-up is the other case: importing Django, the apps and the crawler makes
~110,000 objects that live as long as the process, and the collector walked
them 155 times while it did (55-64 ms, timed with ``gc.callbacks``), to find
~1,300 objects of garbage, a few hundred kilobytes. So ``manage.py`` raises
the thresholds while it starts, and the audits app, ready last, freezes what
start-up made (later full collections skip it) and puts them back:
``manage.py audit --help``, 25 interleaved runs, median 378 -> 284 ms.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

CRAWL_THRESHOLDS = (50_000, 50, 100)

# Start-up makes ~110,000 tracked objects: at most one young collection, none of the older ones.
STARTUP_THRESHOLDS = (100_000, 50, 1_000)

_lock = threading.Lock()
_startup_saved: tuple[int, int, int] | None = None
_active = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def crawl_gc() -> Iterator[None]:
    """Raise the collector's thresholds for the duration (never lower them)."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*(max(a, b) for a, b in zip(_saved, CRAWL_THRESHOLDS, strict=True)))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None


def hold_back_for_startup() -> None:
    """Collect next to nothing until ``put_back_after_startup``: for a process about to import its code.

    The thresholds are raised rather than the collector turned off, so a
    process whose apps never become ready (settings that fail to load, and
    a command that runs without them, such as ``shell``) still collects,
    only rarely.
    """
    global _startup_saved
    if _startup_saved is None:
        _startup_saved = gc.get_threshold()
        gc.set_threshold(*STARTUP_THRESHOLDS)


def put_back_after_startup() -> None:
    """Freeze what start-up made and put the thresholds back; nothing unless ``hold_back_for_startup`` ran.

    The start-up garbage is frozen with the rest instead of costing a full
    collection to find: a fixed few hundred kilobytes, once per process.
    """
    global _startup_saved
    if _startup_saved is not None:
        saved, _startup_saved = _startup_saved, None
        gc.freeze()
        gc.set_threshold(*saved)

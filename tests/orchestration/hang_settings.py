"""Settings for a qcluster whose worker blocks in a C call on one URL, once, like a hung DNS lookup.

Fault injection lives here, in a test-only settings module the cluster subprocess
is started with, not in production code. The first fetch of a URL containing
SITEWARD_TEST_HANG_ON sleeps SITEWARD_TEST_HANG_SECONDS in ``time.sleep``, which holds the crawl thread's
event loop, so the chunk's own soft budget never gets to end it; only
django-q2's task timeout can. Every fetch is logged as a JSON line to
SITEWARD_TEST_FETCH_LOG (pid, URL, time, and the hang's start and end). The
marker file SITEWARD_TEST_HANG_MARK makes the hang happen in one process only and
holds its pid, so a later fetch of the URL logs whether that process still lives.
"""

import json
import os
import time
from pathlib import Path

import psutil

from config.settings import *  # noqa: F403
from crawler.fetch import Fetcher

_HANG_SECONDS = float(os.environ["SITEWARD_TEST_HANG_SECONDS"])
_HANG_ON = os.environ["SITEWARD_TEST_HANG_ON"]
_LOG = Path(os.environ["SITEWARD_TEST_FETCH_LOG"])
_MARK = Path(os.environ["SITEWARD_TEST_HANG_MARK"])
_fetch = Fetcher.fetch


def _record(event: str, url: str, **more) -> None:
    with _LOG.open("a") as log:
        log.write(json.dumps({"event": event, "pid": os.getpid(), "url": url, "at": time.time(), **more}) + "\n")


def _first_to_hang() -> bool:
    try:
        with _MARK.open("x") as mark:
            mark.write(str(os.getpid()))
    except FileExistsError:
        return False
    return True


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: a killed worker its sentinel has not reaped yet is a zombie, not alive."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def _fetch_or_hang(self, url, *args, **kwargs):
    if _HANG_ON not in url:
        _record("fetch", url)
    elif _first_to_hang():
        _record("hang", url)
        time.sleep(_HANG_SECONDS)  # blocks the event loop: no await, no cancellation, no soft budget
        _record("woke", url)
    else:
        _record("fetch", url, hung_alive=_alive(int(_MARK.read_text())))
    return await _fetch(self, url, *args, **kwargs)


Fetcher.fetch = _fetch_or_hang

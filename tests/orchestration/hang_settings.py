"""Settings for a qcluster whose worker blocks in a C call on one URL, once, like a hung DNS lookup.

Fault injection lives here, in a test-only settings module the cluster subprocess
is started with, not in production code. The first fetch of a URL containing
SITEWARD_TEST_HANG_ON sleeps SITEWARD_TEST_HANG_SECONDS in ``time.sleep``, which holds the crawl thread's
event loop, so the chunk's own soft budget never gets to end it; only
django-q2's task timeout can. Every fetch is logged as a JSON line to
SITEWARD_TEST_FETCH_LOG (pid, URL, time, and the hang's start and end), and the
marker file SITEWARD_TEST_HANG_MARK makes the hang happen in one process only.
"""

import json
import os
import time
from pathlib import Path

from config.settings import *  # noqa: F403
from crawler.fetch import Fetcher

_HANG_SECONDS = float(os.environ["SITEWARD_TEST_HANG_SECONDS"])
_HANG_ON = os.environ["SITEWARD_TEST_HANG_ON"]
_LOG = Path(os.environ["SITEWARD_TEST_FETCH_LOG"])
_MARK = Path(os.environ["SITEWARD_TEST_HANG_MARK"])
_fetch = Fetcher.fetch


def _record(event: str, url: str) -> None:
    with _LOG.open("a") as log:
        log.write(json.dumps({"event": event, "pid": os.getpid(), "url": url, "at": time.time()}) + "\n")


def _first_to_hang() -> bool:
    try:
        _MARK.open("x").close()
    except FileExistsError:
        return False
    return True


async def _fetch_or_hang(self, url, *args, **kwargs):
    _record("fetch", url)
    if _HANG_ON in url and _first_to_hang():
        _record("hang", url)
        time.sleep(_HANG_SECONDS)  # blocks the event loop: no await, no cancellation, no soft budget
        _record("woke", url)
    return await _fetch(self, url, *args, **kwargs)


Fetcher.fetch = _fetch_or_hang

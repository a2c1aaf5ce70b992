"""Settings for a qcluster whose workers die on one URL, like an OOM-killed worker.

Fault injection lives here, in a test-only settings module the cluster subprocess
is started with, not in production code: any page fetch whose URL contains
SITEWARD_TEST_KILL_ON ends the worker process at once.
"""

import os

from config.settings import *  # noqa: F403
from crawler.fetch import Fetcher

_KILL_ON = os.environ["SITEWARD_TEST_KILL_ON"]
_fetch = Fetcher.fetch


async def _fetch_or_die(self, url, *args, **kwargs):
    if _KILL_ON in url:
        os._exit(137)
    return await _fetch(self, url, *args, **kwargs)


Fetcher.fetch = _fetch_or_die

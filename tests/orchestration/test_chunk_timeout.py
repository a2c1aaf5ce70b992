"""A chunk stuck in a blocking call past django-q2's task timeout (RELIABILITY row 5).

The soft budget cannot end a chunk whose event loop is held by a C call (a hung
DNS lookup, a blocking read); django-q2's sentinel kills that worker at the
task timeout, the broker hands the task out again after Q_RETRY (longer than
the timeout, so never while the first run lives), the lease is reclaimed once,
and the audit finishes with every page stored once.
"""

import json
from collections import Counter

import pytest

from audits.models import Audit, ChunkLease, Page
from audits.services import create_audit
from tests.conftest import wait_for

from .grid_site import GridSite

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

# At the timeout django-q2 raises in the worker, whose crawl thread stays stuck, so the
# heartbeat stops and the lease (3 s) expires; its sentinel kills the worker 3 s later.
# The task comes back after Q_RETRY, well past both. The chunks' own soft deadline
# (2 s) keeps every other chunk far from the timeout.
TIMEOUT, RETRY = 6, 15
HANG_ON = "/p/6"
HANG_SECONDS = 30  # far past the retry: only a kill lets the chunk run again sooner


def fetches(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_chunk_blocked_past_the_task_timeout_is_killed_and_run_again_once_never_beside_itself(
        owner, cluster_factory, tmp_path):
    log, mark = tmp_path / "fetches.jsonl", tmp_path / "hung"
    with GridSite(pages=20) as site:
        cluster = cluster_factory(
            DJANGO_SETTINGS_MODULE="tests.orchestration.hang_settings", SITEWARD_TEST_HANG_ON=HANG_ON,
            SITEWARD_TEST_FETCH_LOG=log, SITEWARD_TEST_HANG_MARK=mark,
            SITEWARD_TEST_HANG_SECONDS=HANG_SECONDS, Q_TIMEOUT=TIMEOUT, Q_RETRY=RETRY,
            SITEWARD_LEASE_SECONDS=3, SITEWARD_CHUNK_SECONDS=2).start()
        audit = create_audit(owner, enforce_quota=False, start_url=site.url("/"), allow_private=True,
                             concurrency=2, max_pages=100)

        def ended():
            audit.refresh_from_db()
            return audit.status in Audit.ENDED

        wait_for(ended, 90, interval=0.5, message=lambda: f"the audit to end; log:\n{cluster.log()}")
        assert audit.status == "completed", (audit.error_code, audit.error_detail, cluster.log())

        urls = list(Page.objects.filter(audit=audit).values_list("url", flat=True))
        assert len(urls) == len(set(urls)) and {site.url(p) for p in site.page_paths()} <= set(urls)
        page = Page.objects.get(audit=audit, url=site.url(HANG_ON))
        assert (page.status_code, page.fetch_error) == (200, "")

    events = fetches(log)
    (hang,) = [e for e in events if e["event"] == "hang"]
    # The same URL was fetched once more, by another process, after the timeout and
    # before the sleep would have ended; and by then the hung worker was dead: the
    # kill, not the sleep, let the chunk go on, and it never ran beside itself.
    (again,) = [e for e in events if e["url"] == hang["url"] and e["event"] == "fetch"]
    assert again["pid"] != hang["pid"] and again["hung_alive"] is False, again
    assert hang["at"] + TIMEOUT <= again["at"] < hang["at"] + HANG_SECONDS
    # One reincarnation: the chunk holding the URL was claimed twice, no chunk more often.
    attempts = Counter(ChunkLease.objects.filter(audit=audit, number__gt=0).values_list("attempts", flat=True))
    assert attempts[2] == 1 and max(attempts) == 2, attempts

"""A Retry-After pauses the audited site for the audit, not for one chunk: the pause is stored on
the audit's row and the next chunk (on any worker) starts nothing on the site before it ends.

The site is a loopback server that throttles after a few pages (429, Retry-After: 2, to every
request for the next two seconds) and records when each request came. The in-task Retry-After cap
is lowered to half a second, so a two-second wait is the window's pause, as a longer one is in
production, and the test stays short.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from audits.crawl.chunk import run_chunk, site_pause
from audits.dispatch import RETRY_AFTER_RESCHEDULE_CAP
from audits.models import Audit, Page
from tests.crawler.hostile_server import HostileServer, Throttle, static
from tests.factories import make_audit
from tests.orchestration.test_rate_limit_reschedule import page, started

PAGES = [f"/p{n}" for n in range(6)]


@pytest.fixture
def site():
    with HostileServer() as server:
        yield server


@pytest.fixture
def short_in_task_wait(monkeypatch):
    monkeypatch.setattr("audits.crawl.setup.RETRY_AFTER_IN_TASK", 0.5)


def throttled_site(server: HostileServer, allow: int, wait: int) -> Throttle:
    throttle = Throttle(allow=allow, wait=wait, body=page())
    server.route("/", static(page(*PAGES)))
    for path in PAGES:
        server.route(path, throttle)
    return throttle


@pytest.mark.django_db
def test_the_next_chunk_waits_out_the_retry_after_the_last_chunk_was_given(
        owner, site, fast_settings, short_in_task_wait):
    # Chunk 1 ends (its soft deadline, 1 s) during the site's two-second pause: the pages it held back
    # go to chunk 2, which has time enough to wait the pause out.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SOFT_DEADLINE": 1.0}
    throttle = throttled_site(site, allow=1, wait=2)
    audit, dispatcher, _ = started(owner, site, concurrency=1, check_external=False)
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    assert throttle.paused_at is not None and len(throttle.arrivals) == 2  # a page, then the 429
    assert dispatcher.steps[-1] == ("chunk", audit.pk, 2)  # pages are due: no wait, the next chunk
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SOFT_DEADLINE": 5.0}
    assert run_chunk(audit.pk, 2, dispatcher) == "done"
    # Chunk 2 sent nothing while the site's pause ran, and crawled the pages after it.
    assert throttle.during_pause() == [throttle.paused_at]
    assert len(throttle.arrivals) > 2 and throttle.arrivals[2] >= throttle.paused_at + throttle.wait
    done = Page.objects.filter(audit=audit, url__in=[site.url(path) for path in PAGES[2:]])
    assert sorted(done.values_list("status_code", flat=True)) == [200] * 4


@pytest.mark.django_db
def test_a_chunk_started_after_the_pause_ended_does_not_wait(owner, site, fast_settings):
    throttle = throttled_site(site, allow=100, wait=2)
    audit, dispatcher, _ = started(owner, site, concurrency=1, check_external=False)
    Audit.objects.filter(pk=audit.pk).update(site_paused_until=timezone.now() - timedelta(seconds=30))
    began = time.monotonic()
    assert run_chunk(audit.pk, 1, dispatcher) == "done"
    assert len(throttle.arrivals) == len(PAGES) and throttle.arrivals[0] - began < 1.0


@pytest.mark.django_db
def test_the_stored_pause_only_grows_and_a_chunk_waits_no_longer_than_the_reschedule_cap(owner):
    audit = make_audit(owner)
    assert site_pause(audit) == 0.0
    audit.pause_site(20)
    audit.pause_site(5)  # a shorter answer later does not end the longer pause another chunk was given
    assert 19 < site_pause(audit) <= 20
    Audit.objects.filter(pk=audit.pk).update(site_paused_until=timezone.now() + timedelta(days=3))
    assert site_pause(audit) == RETRY_AFTER_RESCHEDULE_CAP

"""Audits on a real `manage.py qcluster`: completion, a SIGKILLed cluster, a poison URL, two clusters."""


import time

import pytest
from django.conf import settings

from audits.apps import ensure_watchdog_schedule
from audits.models import Audit, ChunkLease, Page
from audits.services import create_audit
from tests.conftest import wait_for

from .grid_site import GridSite

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def new_audit(owner, site, **fields) -> Audit:
    fields.setdefault("concurrency", 2)
    fields.setdefault("max_pages", 200)
    return create_audit(owner, enforce_quota=False, start_url=site.url("/"), allow_private=True, **fields)


def ended(audit: Audit) -> bool:
    audit.refresh_from_db()
    return audit.status in Audit.ENDED


def assert_every_page_stored_once(audit: Audit, site: GridSite) -> None:
    urls = list(Page.objects.filter(audit=audit).values_list("url", flat=True))
    assert len(urls) == len(set(urls))
    assert {site.url(path) for path in site.page_paths()} <= set(urls)


def test_an_audit_completes_on_a_real_worker_cluster(owner, grid_site, running_cluster):
    audit = new_audit(owner, grid_site)
    wait_for(lambda: ended(audit), 60, message=lambda: f"audit to end; cluster log:\n{running_cluster.log()}")
    assert audit.status == "completed", (audit.error_code, audit.error_detail, running_cluster.log())
    assert_every_page_stored_once(audit, grid_site)
    assert audit.issues.filter(code="broken_link_internal").exists()


# What recovery after a dead cluster takes as deployed: the default lease and its
# heartbeat, the watchdog run by the cluster's own scheduler, django-q2's default
# redelivery (which is far longer, so it cannot be what recovers the chunk).
DEFAULT_RECOVERY = {"SITEWARD_LEASE_SECONDS": None, "Q_SCHEDULER": 1, "Q_TIMEOUT": None, "Q_RETRY": None,
                    "SITEWARD_WATCHDOG_GRACE": None}
RECOVERY_LIMIT_SECONDS = 60


def test_a_cluster_killed_mid_crawl_and_restarted_finishes_the_audit_within_a_minute(owner, cluster_factory):
    ensure_watchdog_schedule()  # a transactional test's flush may have taken it
    with GridSite(pages=60, delay=0.15) as site:
        killed = cluster_factory(**DEFAULT_RECOVERY).start()
        audit = new_audit(owner, site)

        def mid_chunk():
            # A request being answered (each takes 0.15 s) means the leased chunk
            # is waiting on it, so the kill below, a few ms later, lands before
            # that chunk can finish: it must be retried.
            audit.refresh_from_db()
            return (audit.pages_crawled >= 8 and ChunkLease.objects.filter(audit=audit, state="leased").exists()
                    and site.serving())

        wait_for(mid_chunk, 60, interval=0.05, message="a chunk in flight")
        restart = cluster_factory(**DEFAULT_RECOVERY)  # built before the kill, started right after it
        killed.kill()  # SIGKILL: sentinel, pusher and the worker holding a chunk all die at once
        killed_at = time.monotonic()
        audit.refresh_from_db()
        assert audit.status == "running" and audit.pages_crawled < 61
        restart.start()
        wait_for(lambda: ended(audit), RECOVERY_LIMIT_SECONDS + 30, interval=0.5,
                 message=lambda: f"audit to finish after the restart; log:\n{restart.log()}")
        recovered_in = time.monotonic() - killed_at
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert recovered_in < RECOVERY_LIMIT_SECONDS, f"recovered in {recovered_in:.0f} s"
        print(f"killed cluster: audit completed {recovered_in:.1f} s after the kill")
        assert_every_page_stored_once(audit, site)
        assert ChunkLease.objects.filter(audit=audit, attempts__gte=2).exists()  # a chunk was retried


def test_a_url_that_kills_its_worker_every_time_stops_after_the_attempt_limit(owner, cluster_factory):
    with GridSite(pages=30) as site:
        poison = "/p/9"
        cluster_factory(DJANGO_SETTINGS_MODULE="tests.orchestration.fault_settings", SITEWARD_TEST_KILL_ON=poison).start()
        audit = new_audit(owner, site)
        wait_for(lambda: ended(audit), 120, message="audit to end despite the poison URL")
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        page = Page.objects.get(audit=audit, url=site.url(poison))
        assert page.fetch_error == "worker_lost"
        chunk = ChunkLease.objects.get(audit=audit, number__gt=0, attempts__gte=2)
        assert chunk.attempts <= 3
        assert Page.objects.filter(audit=audit).exclude(fetch_error="").exclude(url=site.url(poison)).count() == 0
        # Its siblings in the same chunk were crawled normally on the serial retry.
        assert Page.objects.filter(audit=audit, url=site.url("/p/8"), status_code=200).exists()


ON_POSTGRESQL = "postgresql" in settings.DATABASES["default"]["ENGINE"]


# SQLite runs one cluster (one writer); the PostgreSQL CI run covers this.
@pytest.mark.skipif(not ON_POSTGRESQL, reason="several clusters share work on PostgreSQL only")
def test_two_clusters_on_postgresql_share_several_audits_without_storing_a_page_twice(owner, cluster_factory):
    sites = [GridSite(pages=40, delay=0.02).start() for _ in range(3)]
    try:
        cluster_factory().start()
        cluster_factory().start()
        audits = [new_audit(owner, site) for site in sites]
        for audit in audits:
            wait_for(lambda a=audit: ended(a), 120, message=f"audit {audit.pk}")
        pids = set()
        for audit, site in zip(audits, sites, strict=True):
            assert audit.status == "completed"
            assert_every_page_stored_once(audit, site)
            for path in site.page_paths():
                assert site.hits(path) == 1, path
            pids |= set(ChunkLease.objects.filter(audit=audit).values_list("worker_pid", flat=True))
        assert len(pids - {None}) >= 2  # the work really was shared between processes
    finally:
        for site in sites:
            site.stop()

"""Rendered audits on real clusters: the render queue's own `qcluster`, killed mid-chunk, and the audit still ends."""

import time

import pytest

from audits.apps import ensure_watchdog_schedule
from audits.models import Audit, ChunkLease, Page
from audits.services import create_audit
from tests.conftest import wait_for
from tests.render_site import RenderSite

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RENDER = {"Q_CLUSTER_NAME": "render"}


def ended(audit: Audit) -> bool:
    audit.refresh_from_db()
    return audit.status in Audit.ENDED


def test_a_render_cluster_killed_mid_chunk_and_restarted_finishes_the_rendered_audit(owner, cluster_factory):
    ensure_watchdog_schedule()  # a transactional test's flush may have taken it
    with RenderSite(pages=30) as site:
        crawl = cluster_factory(Q_SCHEDULER=1).start()  # the watchdog and finalize
        killed = cluster_factory(**RENDER).start()
        audit = create_audit(owner, enforce_quota=False, start_url=site.url(), allow_private=True,
                             check_external=False, concurrency=2, render="all")

        def mid_chunk():
            audit.refresh_from_db()
            return audit.pages_crawled >= 3 and ChunkLease.objects.filter(audit=audit, state="leased").exists()

        wait_for(mid_chunk, 90, interval=0.05, message=lambda: f"a rendered chunk in flight:\n{killed.log()}")
        restart = cluster_factory(**RENDER)
        killed.kill()  # SIGKILL: the worker, its browser's driver and Chromium die with the group
        killed_at = time.monotonic()
        audit.refresh_from_db()
        assert audit.status == "running" and audit.pages_crawled < 31
        restart.start()
        wait_for(lambda: ended(audit), 150, interval=0.5,
                 message=lambda: f"the audit to end; render log:\n{restart.log()}\ncrawl log:\n{crawl.log()}")
        print(f"killed render cluster: audit ended {time.monotonic() - killed_at:.1f} s after the kill")
    assert audit.status == "completed", (audit.error_code, audit.error_detail)
    rendered = set(Page.objects.filter(audit=audit, rendered=True).values_list("url", flat=True))
    assert rendered == {site.url(), *(site.url(f"/app/{n}") for n in range(30))}
    assert ChunkLease.objects.filter(audit=audit, attempts__gte=2).exists()  # the killed chunk ran again

"""A start or finalize step that never finishes ends the audit after three tries, keeping what was crawled."""

import pytest
from django.utils import timezone

from audits import finalize
from audits.crawl.start import run_start
from audits.finalize import run_finalize
from audits.models import Audit, FrontierURL
from audits.services import create_audit
from crawler.urls import url_hash
from tests.conftest import wait_for
from tests.factories import make_audit, make_page

from .grid_site import GridSite

pytestmark = pytest.mark.django_db


def test_a_finalize_tried_three_times_fails_the_audit_as_finalize_failed_and_keeps_its_pages(owner):
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING,
                       started_at=timezone.now())
    make_page(audit, "https://shop.example/")
    Audit.objects.filter(pk=audit.pk).update(finalize_attempts=3)  # three workers died inside it
    assert run_finalize(audit.pk) is False
    audit.refresh_from_db()
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "finalize_failed", "finalizing")
    assert "tried 3 times" in audit.error_detail and audit.pages.count() == 1


@pytest.mark.parametrize("when", ["first", "last"])
def test_an_audit_cancelled_while_it_finalizes_keeps_its_frontier_and_gets_no_diff_or_score(owner, monkeypatch,
                                                                                            when):
    """Resumed, it finalizes again: without its frontier, pages it only queued would be called removed."""
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING,
                       started_at=timezone.now())
    make_page(audit, "https://shop.example/")
    FrontierURL.objects.create(audit=audit, url="https://shop.example/queued", url_hash=url_hash(
        "https://shop.example/queued"), depth=1)
    index = 0 if when == "first" else -1
    real = finalize.CHECKS[index]

    def cancelled_meanwhile(audit_id):
        Audit.objects.get(pk=audit_id).cancel()
        return real(audit_id)

    checks = list(finalize.CHECKS)
    checks[index] = cancelled_meanwhile
    monkeypatch.setattr(finalize, "CHECKS", checks)
    assert run_finalize(audit.pk) is False
    audit.refresh_from_db()
    assert (audit.status, audit.score, audit.change_counts) == (Audit.Status.CANCELLED, None, None)
    assert FrontierURL.objects.filter(audit=audit).count() == 1


def test_each_start_and_finalize_counts_one_try(owner, grid_site, fast_settings):
    audit = make_audit(owner, start_url=grid_site.url("/"), allow_private=True)
    run_start(audit.pk)
    audit.refresh_from_db()
    assert audit.start_attempts == 1 and audit.status == "running"


def test_a_resumed_audit_gets_fresh_start_and_finalize_tries(owner):
    """An audit that failed at start (its site was down) is resumed once it is up: an old count of tries
    would end the resumed start as start_failed before it fetched anything."""
    audit = make_audit(owner, status=Audit.Status.FAILED, start_attempts=3, finalize_attempts=3)
    assert audit.reopen_for_resume()
    audit.refresh_from_db()
    assert (audit.start_attempts, audit.finalize_attempts) == (0, 0)


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_a_start_page_that_kills_its_worker_every_time_fails_the_audit_as_start_failed(owner, cluster_factory):
    with GridSite(pages=5) as site:
        # django-q2 redelivers the dead worker's task after Q_RETRY seconds; small
        # numbers keep the three tries within seconds.
        cluster = cluster_factory(DJANGO_SETTINGS_MODULE="tests.orchestration.fault_settings",
                                  SITEWARD_TEST_KILL_ON="/p/0", Q_TIMEOUT=3, Q_RETRY=4,
                                  SITEWARD_CHUNK_SECONDS=2).start()
        audit = create_audit(owner, enforce_quota=False, start_url=site.url("/p/0"), allow_private=True)

        def ended():
            audit.refresh_from_db()
            return audit.status in Audit.ENDED

        wait_for(ended, 60, interval=0.5, message=lambda: f"the audit to end; log:\n{cluster.log()}")
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "start_failed", "starting")
    assert audit.start_attempts == 4  # three tries died; the fourth delivery ended it

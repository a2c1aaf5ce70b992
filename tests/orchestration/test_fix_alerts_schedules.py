"""A fire of a site's schedule delivered twice (django-q2 delivers at least once) starts or skips once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audits import schedules
from audits.models import Audit, Site, SkippedRun
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


@pytest.fixture
def site(owner, settings) -> Site:
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = Site.objects.create(owner=owner, start_url="http://127.0.0.1:9/", allow_private=True,
                               cadence=Site.Cadence.DAILY, hour=3, minute=0, time_zone="Europe/Berlin")
    schedules.sync(site)
    return site


def due(site: Site, days_ago: int) -> str:
    """The site's run time ``days_ago`` days back, as django-q2 passes it."""
    return site.next_run_after(timezone.now() - timedelta(days=days_ago + 1)).isoformat()


def test_a_fire_delivered_again_after_its_audit_ended_starts_no_second_audit(site):
    first = schedules.run_due(site.pk, due(site, 2))
    [audit] = Audit.objects.filter(site=site)
    assert first == f"started audit {audit.pk} of site {site.pk}"
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.COMPLETED, finished_at=timezone.now())

    again = schedules.run_due(site.pk, due(site, 2))

    assert again == f"the run of site {site.pk} at {due(site, 2)} was already handled"
    assert list(Audit.objects.filter(site=site)) == [audit]
    assert not SkippedRun.objects.exists()
    # The next night's fire is a new one and starts its audit.
    assert schedules.run_due(site.pk, due(site, 1)).startswith("started audit")
    assert Audit.objects.filter(site=site).count() == 2


def test_a_skipped_fire_delivered_again_is_recorded_once_and_starts_nothing(site, owner):
    running = make_audit(owner, site=site, start_url=site.start_url, status=Audit.Status.RUNNING)
    assert schedules.run_due(site.pk, due(site, 2)) == f"skipped the run of site {site.pk}: still_running"
    running.cancel()

    schedules.run_due(site.pk, due(site, 2))

    assert list(Audit.objects.filter(site=site)) == [running]
    assert list(SkippedRun.objects.values_list("reason", flat=True)) == [SkippedRun.Reason.STILL_RUNNING]


def test_a_late_delivery_of_an_older_fire_starts_nothing(site):
    schedules.run_due(site.pk, due(site, 1))
    assert schedules.run_due(site.pk, due(site, 2)).endswith("was already handled")
    assert Audit.objects.filter(site=site).count() == 1

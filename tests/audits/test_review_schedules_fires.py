"""What a fire of a site's schedule starts, for owners an operator has stopped."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audits import schedules
from audits.models import Audit, Site, SkippedRun

pytestmark = pytest.mark.django_db


def test_a_fire_for_a_deactivated_owner_starts_no_audit(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = Site.objects.create(owner=owner, start_url="http://127.0.0.1:9/", allow_private=True,
                               cadence=Site.Cadence.DAILY)
    schedules.sync(site)
    owner.is_active = False
    owner.save(update_fields=["is_active"])

    # Scheduled for a week, its last fire handled four days ago.
    Site.objects.filter(pk=site.pk).update(schedule_set_at=timezone.now() - timedelta(days=7),
                                           last_due_at=site.next_run_after(timezone.now() - timedelta(days=5)))
    runs = [site.next_run_after(timezone.now() - timedelta(days=4))]
    while (later := site.next_run_after(runs[-1])) <= timezone.now():
        runs.append(later)
    *off, tonight = runs  # the nights the account was off, and the latest run time
    for due in off:
        assert schedules.run_due(site.pk, due.isoformat()) == f"site {site.pk}: its owner's account is deactivated"
    assert not Audit.objects.filter(site=site).exists()

    owner.is_active = True
    owner.save(update_fields=["is_active"])
    assert schedules.run_due(site.pk, tonight.isoformat()).startswith("started audit")
    # The nights the account was off had their fires: none is listed as a run no cluster fired.
    assert not SkippedRun.objects.filter(site=site, reason=SkippedRun.Reason.MISSED).exists()


"""What a fire of a site's schedule starts, for owners an operator has stopped."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audits import schedules
from audits.models import Audit, Site

pytestmark = pytest.mark.django_db


def test_a_fire_for_a_deactivated_owner_starts_no_audit(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = Site.objects.create(owner=owner, start_url="http://127.0.0.1:9/", allow_private=True,
                               cadence=Site.Cadence.DAILY)
    schedules.sync(site)
    owner.is_active = False
    owner.save(update_fields=["is_active"])

    due = site.next_run_after(timezone.now() - timedelta(days=2)).isoformat()
    assert schedules.run_due(site.pk, due) == f"site {site.pk}: its owner's account is deactivated"
    assert not Audit.objects.filter(site=site).exists()

    owner.is_active = True
    owner.save(update_fields=["is_active"])
    assert schedules.run_due(site.pk, due).startswith("started audit")


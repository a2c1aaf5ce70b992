"""A schedule across the night the clocks go back: a daily run at a repeated local time runs once."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django_q.models import Schedule

from audits import schedules
from audits.models import Audit, Site, SkippedRun

pytestmark = pytest.mark.django_db

# Berlin's clocks go back from 03:00 to 02:00 on 2026-10-25: 02:30 local is 00:30 UTC, then 01:30 UTC.
FIRST_PASS = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
SECOND_PASS = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)


def berlin_site(owner, **fields) -> Site:
    fields.setdefault("cadence", Site.Cadence.DAILY)
    return Site.objects.create(owner=owner, start_url="http://127.0.0.1:9/", allow_private=True, hour=2,
                               minute=30, time_zone="Europe/Berlin", **fields)


def test_a_daily_run_at_a_repeated_local_time_starts_one_audit_the_night_the_clocks_go_back(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    with time_machine.travel(FIRST_PASS - timedelta(hours=3), tick=False):
        site = berlin_site(owner)
        schedules.sync(site)
    assert Schedule.objects.get(name=site.schedule_name).next_run == FIRST_PASS

    with time_machine.travel(FIRST_PASS + timedelta(seconds=5), tick=False):
        assert schedules.run_due(site.pk, FIRST_PASS.isoformat()).startswith("started audit")
    # The next run is the next night's 02:30, not the same 02:30 an hour later.
    assert Schedule.objects.get(name=site.schedule_name).next_run == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)

    Audit.objects.filter(site=site).update(status=Audit.Status.COMPLETED)
    with time_machine.travel(SECOND_PASS + timedelta(seconds=5), tick=False):
        result = schedules.run_due(site.pk, SECOND_PASS.isoformat())
    assert "not a run time" in result
    assert Audit.objects.filter(site=site).count() == 1
    assert not SkippedRun.objects.filter(site=site).exists()


def test_an_hourly_schedule_still_runs_in_both_passes_of_the_repeated_hour(owner):
    site = berlin_site(owner, cadence=Site.Cadence.HOURLY)
    assert schedules.next_run(site, FIRST_PASS).astimezone(UTC) == SECOND_PASS
    assert not schedules.repeated_wall_time(site, SECOND_PASS)

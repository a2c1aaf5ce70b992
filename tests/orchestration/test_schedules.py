"""Site schedules: django-q2 Schedule rows that start audits, skip overlaps, and heal."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task

from audits import schedules
from audits.models import Audit, Site, SkippedRun
from audits.watchdog import run_watchdog
from tests.conftest import wait_for
from tests.factories import make_audit

from .grid_site import GridSite

pytestmark = pytest.mark.django_db


def scheduled_site(owner, **fields) -> Site:
    fields.setdefault("cadence", Site.Cadence.DAILY)
    fields.setdefault("start_url", "http://127.0.0.1:9/")
    site = Site.objects.create(owner=owner, allow_private=True, **fields)
    schedules.sync(site)
    return site


def due_now(site: Site, days: int = 0) -> str:
    """The site's latest run time ``days`` days ago, as django-q2 passes it to a fire on time then."""
    moment = timezone.now() - timedelta(days=days)
    run = site.next_run_after(moment - timedelta(days=8))
    while (later := site.next_run_after(run)) <= moment:
        run = later
    return run.isoformat()


def test_a_fire_starts_an_audit_with_the_sites_settings_and_moves_the_next_run(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = scheduled_site(owner, max_pages=33, hour=4, minute=15, time_zone="America/New_York")
    result = schedules.run_due(site.pk, due_now(site))
    audit = Audit.objects.get(site=site)
    assert result == f"started audit {audit.pk} of site {site.pk}"
    assert audit.trigger == Audit.Trigger.SCHEDULE and audit.max_pages == 33 and audit.status == "queued"
    next_run = Schedule.objects.get(name=site.schedule_name).next_run
    assert next_run > timezone.now()
    assert next_run.astimezone(site.zone()).strftime("%H:%M") == "04:15"


def test_a_fire_while_the_previous_audit_is_active_is_skipped_and_recorded(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = scheduled_site(owner)
    running = make_audit(owner, site=site, start_url=site.start_url, status=Audit.Status.RUNNING)
    schedules.run_due(site.pk, due_now(site))
    assert list(Audit.objects.filter(site=site)) == [running]
    skipped = SkippedRun.objects.get(site=site)
    assert skipped.reason == SkippedRun.Reason.STILL_RUNNING


def test_a_fire_past_the_owners_running_audit_quota_is_skipped_and_recorded(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "MAX_RUNNING_AUDITS_PER_USER": 1}
    make_audit(owner, start_url="https://elsewhere.example/", status=Audit.Status.RUNNING)
    site = scheduled_site(owner)
    schedules.run_due(site.pk, due_now(site))
    assert not Audit.objects.filter(site=site).exists()
    assert SkippedRun.objects.get(site=site).reason == SkippedRun.Reason.QUOTA


def test_a_run_the_quota_held_back_starts_once_a_slot_frees_and_only_once(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "MAX_RUNNING_AUDITS_PER_USER": 1}
    other = make_audit(owner, start_url="https://elsewhere.example/", status=Audit.Status.RUNNING)
    site = scheduled_site(owner)
    schedules.run_due(site.pk, due_now(site))
    assert "starts as soon as one of them ends" in SkippedRun.objects.get(site=site).detail
    assert schedules.start_waiting() == []  # still no slot
    Audit.objects.filter(pk=other.pk).update(status=Audit.Status.COMPLETED)
    started = schedules.start_waiting()
    audit = Audit.objects.get(site=site)
    assert started == [f"started the held-back run of site {site.pk} as audit {audit.pk}"]
    assert audit.trigger == Audit.Trigger.SCHEDULE and audit.status == "queued"
    skipped = SkippedRun.objects.get(site=site)
    assert skipped.reason == SkippedRun.Reason.STARTED_LATE and f"as audit {audit.pk}" in skipped.detail
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.COMPLETED)
    assert schedules.start_waiting() == [] and Audit.objects.filter(site=site).count() == 1


def test_a_held_back_run_whose_next_run_time_came_waits_no_more(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "MAX_RUNNING_AUDITS_PER_USER": 1}
    other = make_audit(owner, start_url="https://elsewhere.example/", status=Audit.Status.RUNNING)
    site = scheduled_site(owner)
    schedules.run_due(site.pk, due_now(site, days=1))
    schedules.run_due(site.pk, due_now(site))  # the next night's fire, held back too
    Audit.objects.filter(pk=other.pk).update(status=Audit.Status.COMPLETED)
    assert len(schedules.start_waiting()) == 1  # the latest run only
    assert Audit.objects.filter(site=site).count() == 1
    assert sorted(SkippedRun.objects.filter(site=site).values_list("reason", flat=True)) == [
        SkippedRun.Reason.QUOTA, SkippedRun.Reason.STARTED_LATE]


def test_the_watchdog_starts_held_back_runs(owner, settings, django_capture_on_commit_callbacks):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "MAX_RUNNING_AUDITS_PER_USER": 1}
    other = make_audit(owner, start_url="https://elsewhere.example/", status=Audit.Status.RUNNING)
    site = scheduled_site(owner)
    schedules.run_due(site.pk, due_now(site))
    Audit.objects.filter(pk=other.pk).update(status=Audit.Status.COMPLETED)
    with django_capture_on_commit_callbacks(execute=True):
        assert "started the held-back run" in run_watchdog()
    assert Audit.objects.filter(site=site, trigger=Audit.Trigger.SCHEDULE).exists()


def test_a_private_site_is_skipped_once_the_deployment_refuses_private_targets(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": False}
    site = scheduled_site(owner)
    schedules.run_due(site.pk, due_now(site))
    assert not Audit.objects.filter(site=site).exists()
    assert SkippedRun.objects.get(site=site).reason == SkippedRun.Reason.PRIVATE_REFUSED


def test_a_fire_at_a_time_that_is_not_a_run_time_in_the_sites_zone_starts_nothing(owner, settings):
    # django-q2 reads the cron in TIME_ZONE (UTC); 03:00 in Tokyo is 18:00 UTC, so
    # a fire django-q2 computes for 03:00 UTC is not one of the site's.
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = scheduled_site(owner, hour=3, minute=0, time_zone="Asia/Tokyo")
    result = schedules.run_due(site.pk, datetime(2026, 12, 5, 3, 0, tzinfo=UTC).isoformat())
    assert "not a run time" in result and not Audit.objects.filter(site=site).exists()
    next_run = Schedule.objects.get(name=site.schedule_name).next_run
    assert next_run.astimezone(site.zone()).strftime("%H:%M") == "03:00"


def test_a_daily_run_keeps_its_local_time_across_a_daylight_saving_change(owner):
    site = Site(owner=owner, start_url="https://a.example/", cadence=Site.Cadence.DAILY, hour=2, minute=30,
                time_zone="Europe/Berlin")
    before = site.next_run_after(datetime(2026, 10, 24, 12, 0, tzinfo=UTC))  # summer time, UTC+2
    after = site.next_run_after(datetime(2026, 10, 25, 12, 0, tzinfo=UTC))  # winter time, UTC+1
    assert before.astimezone(UTC).hour == 0 and after.astimezone(UTC).hour == 1
    assert before.astimezone(site.zone()).strftime("%H:%M") == after.astimezone(site.zone()).strftime("%H:%M")


def test_the_watchdog_recreates_a_vanished_schedule_and_drops_one_no_site_wants(owner):
    site = scheduled_site(owner)
    Schedule.objects.filter(name=site.schedule_name).delete()
    Schedule.objects.create(name="site-999999", func=schedules.FUNC, schedule_type=Schedule.CRON, cron="0 3 * * *")
    result = run_watchdog()
    assert f"recreated the schedule of site {site.pk}" in result
    assert Schedule.objects.filter(name=site.schedule_name).exists()
    assert not Schedule.objects.filter(name="site-999999").exists()


def test_a_paused_site_keeps_no_schedule_and_the_watchdog_does_not_bring_it_back(owner):
    site = scheduled_site(owner)
    site.pause()
    schedules.sync(site)
    run_watchdog()
    assert not Schedule.objects.filter(name=site.schedule_name).exists()
    assert schedules.run_due(site.pk) == f"site {site.pk} is not scheduled"


def test_deleting_the_owner_deletes_the_sites_schedule(owner):
    site = scheduled_site(owner)
    owner.delete()
    assert not Schedule.objects.filter(name=site.schedule_name).exists()


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_a_schedule_fires_on_a_real_cluster_survives_its_restart_and_never_overlaps(owner, cluster_factory):
    # Slow enough (a page a second, one at a time) that the first audit still runs
    # when the schedule fires again. django-q2's scheduler runs once 30 s of guard
    # cycles add up: a cycle of 30 s makes each cluster look at its start.
    with GridSite(pages=150, delay=1.0) as grid:
        site = Site.objects.create(owner=owner, start_url=grid.url("/"), allow_private=True, concurrency=1,
                                   max_pages=150, check_external=False, cadence=Site.Cadence.CRON,
                                   cron="* * * * *")
        schedules.sync(site)
        # A minute back, so the second fire below (this minute or later) is for another run time:
        # a fire for the same run time again is a redelivery, which starts and skips nothing.
        last_minute = timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=1)
        Schedule.objects.filter(name=site.schedule_name).update(next_run=last_minute)
        first = cluster_factory(Q_SCHEDULER=1, Q_GUARD_CYCLE=30).start()
        audit = wait_for(lambda: Audit.objects.filter(site=site).first(), 75,
                         message=lambda: f"the schedule to fire; log:\n{first.log()}")
        assert audit.trigger == Audit.Trigger.SCHEDULE

        first.kill()  # the schedule lives in the database, not in the cluster
        Schedule.objects.filter(name=site.schedule_name).update(
            next_run=timezone.now().replace(second=0, microsecond=0))
        second = cluster_factory(Q_SCHEDULER=1, Q_GUARD_CYCLE=30).start()
        # It fires the minute set above late, so the one it passes meanwhile, if any, is missed.
        skipped = wait_for(lambda: SkippedRun.objects.filter(site=site).exclude(reason="missed").first(), 75,
                           message=lambda: f"the second fire; log:\n{second.log()}")
        assert skipped.reason == SkippedRun.Reason.STILL_RUNNING
        assert Audit.objects.filter(site=site).count() == 1
        audit.refresh_from_db()
        assert audit.is_active
        audit.cancel()


def test_a_delta_site_runs_a_delta_crawl_of_its_last_full_or_delta_audit(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = scheduled_site(owner, scheduled_mode="delta")
    # The first run has nothing to reuse: a full crawl.
    schedules.run_due(site.pk, due_now(site, days=1))
    first = Audit.objects.get(site=site)
    assert first.mode == Audit.Mode.FULL
    Audit.objects.filter(pk=first.pk).update(status=Audit.Status.COMPLETED)
    # A later validation is a few URLs, not something a whole crawl can reuse.
    make_audit(owner, site=site, start_url=site.start_url, mode=Audit.Mode.VALIDATE, source=first,
               status=Audit.Status.COMPLETED)
    # The next run time: the first fire's own time again would be a redelivery, which starts nothing.
    schedules.run_due(site.pk, due_now(site))
    second = Audit.objects.filter(site=site).latest("pk")
    assert (second.mode, second.source_id, second.trigger) == (Audit.Mode.DELTA, first.pk, Audit.Trigger.SCHEDULE)


def hourly_site_set_long_ago(owner, **fields) -> Site:
    site = scheduled_site(owner, cadence=Site.Cadence.HOURLY, **fields)
    Site.objects.filter(pk=site.pk).update(schedule_set_at=timezone.now() - timedelta(days=30))
    return site


def hourly_site_and_latest_run(owner, settings, **fields) -> tuple[Site, datetime]:
    """An hourly site set long ago (private targets allowed), and its latest run time."""
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = hourly_site_set_long_ago(owner, **fields)
    return site, datetime.fromisoformat(due_now(site))


def _queued_by_the_scheduler(site: Site, due: datetime, next_run: datetime) -> None:
    """As django-q2's scheduler queues a fire: the run time under the due keyword, the row moved on."""
    async_task(schedules.FUNC, site.pk, due=due.astimezone(UTC).isoformat(), q_options={"group": site.schedule_name})
    Schedule.objects.filter(name=site.schedule_name).update(next_run=next_run)


def test_the_run_times_a_cluster_caught_up_past_are_recorded_as_missed_by_its_fire(owner, settings):
    # No cluster ran for four hours: django-q2 (catch_up off) fired the oldest run time it missed once, late,
    # and moved the schedule past the others.
    site, latest = hourly_site_and_latest_run(owner, settings, minute=7, time_zone="Asia/Kolkata")
    Schedule.objects.filter(name=site.schedule_name).update(next_run=latest + timedelta(hours=1))
    assert schedules.run_due(site.pk, (latest - timedelta(hours=4)).isoformat()).startswith("started audit")
    missed = SkippedRun.objects.filter(site=site).order_by("due_at")
    assert [run.due_at for run in missed] == [latest - timedelta(hours=n) for n in (3, 2, 1, 0)]
    assert {run.reason for run in missed} == {SkippedRun.Reason.MISSED}
    assert "IST" in missed[0].detail  # told in the site's zone
    schedules.run_due(site.pk, (latest - timedelta(hours=4)).isoformat())  # delivered again: handled once
    Audit.objects.filter(site=site).update(status=Audit.Status.COMPLETED)
    assert schedules.run_due(site.pk, (latest + timedelta(hours=1)).isoformat()).startswith("started audit")
    assert SkippedRun.objects.filter(site=site).count() == 4  # the next fire records none of them again


def test_the_run_times_no_fire_came_for_are_recorded_as_missed_by_the_next_fire(owner, settings):
    # The catch-up fire was queued between two run times, and the scheduler queued the later ones on time.
    site, latest = hourly_site_and_latest_run(owner, settings, minute=7)
    for hours in (2, 1, 0):
        _queued_by_the_scheduler(site, latest - timedelta(hours=hours), latest - timedelta(hours=hours - 1))
    assert schedules.run_due(site.pk, (latest - timedelta(hours=4)).isoformat()).startswith("started audit")
    assert [run.due_at for run in SkippedRun.objects.filter(site=site)] == [latest - timedelta(hours=3)]
    Audit.objects.filter(site=site).update(status=Audit.Status.COMPLETED)
    assert schedules.run_due(site.pk, latest.isoformat()).startswith("started audit")
    missed = SkippedRun.objects.filter(site=site).order_by("due_at")
    assert [run.due_at for run in missed] == [latest - timedelta(hours=n) for n in (3, 2, 1)]


def test_an_on_time_fire_in_the_hour_the_clock_goes_back_is_no_missed_run(owner, settings, monkeypatch):
    # 01:07 New York time comes twice on 2026-11-01; the first pass is the run time (repeated_wall_time).
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = hourly_site_set_long_ago(owner, minute=7, time_zone="America/New_York")
    first_pass = datetime(2026, 11, 1, 5, 7, tzinfo=UTC)
    monkeypatch.setattr(schedules.timezone, "now", lambda: first_pass + timedelta(minutes=3))
    Site.objects.filter(pk=site.pk).update(last_due_at=first_pass - timedelta(hours=1),
                                           schedule_set_at=first_pass - timedelta(days=30))
    Schedule.objects.filter(name=site.schedule_name).update(next_run=first_pass + timedelta(hours=2))
    assert schedules.run_due(site.pk, first_pass.isoformat()).startswith("started audit")
    assert not SkippedRun.objects.filter(site=site).exists()


def test_a_fire_run_late_by_a_busy_queue_records_nothing_missed(owner, settings):
    # Both fires were queued on time; the first ran when its successor was already due.
    site, latest = hourly_site_and_latest_run(owner, settings)
    _queued_by_the_scheduler(site, latest, latest + timedelta(hours=1))
    schedules.run_due(site.pk, (latest - timedelta(hours=1)).isoformat())
    assert schedules.run_due(site.pk, latest.isoformat()) == f"skipped the run of site {site.pk}: still_running"
    assert list(SkippedRun.objects.filter(site=site).values_list("reason", flat=True)) == [
        SkippedRun.Reason.STILL_RUNNING]


def test_a_run_time_this_fire_moves_the_row_past_before_the_scheduler_queued_it_is_missed(owner, settings):
    # The fire ran late, after its successor came due but before the scheduler's next pass queued it.
    site, latest = hourly_site_and_latest_run(owner, settings)
    Schedule.objects.filter(name=site.schedule_name).update(next_run=latest)
    assert schedules.run_due(site.pk, (latest - timedelta(hours=1)).isoformat()).startswith("started audit")
    assert Schedule.objects.get(name=site.schedule_name).next_run > latest  # the scheduler will not fire it now
    assert [run.due_at for run in SkippedRun.objects.filter(site=site)] == [latest]


def test_a_fire_overtaken_by_a_later_one_is_recorded_as_missed(owner, settings):
    # Two fires waited in a busy queue, and a second worker took the later one first: the earlier
    # one will find its run time handled already, so the later one records it.
    site, latest = hourly_site_and_latest_run(owner, settings)
    Site.objects.filter(pk=site.pk).update(last_due_at=latest - timedelta(hours=2))
    _queued_by_the_scheduler(site, latest - timedelta(hours=1), latest + timedelta(hours=1))
    assert schedules.run_due(site.pk, latest.isoformat()).startswith("started audit")
    assert schedules.run_due(site.pk, (latest - timedelta(hours=1)).isoformat()).endswith("already handled")
    assert [run.due_at for run in SkippedRun.objects.filter(site=site)] == [latest - timedelta(hours=1)]


def test_run_times_while_the_schedule_was_paused_or_another_are_not_missed(owner, settings):
    site, latest = hourly_site_and_latest_run(owner, settings)
    Site.objects.filter(pk=site.pk).update(last_due_at=latest - timedelta(hours=5))  # a fire handled on time then
    site.refresh_from_db()
    site.pause()
    schedules.sync(site)
    site.resume()
    schedules.sync(site)  # resumed now: the paused hours were nobody's run times
    assert schedules.run_due(site.pk, latest.isoformat()).startswith("started audit")
    assert not SkippedRun.objects.filter(site=site).exists()


def test_an_outage_of_weeks_is_told_in_a_bounded_number_of_rows(owner, settings):
    site, latest = hourly_site_and_latest_run(owner, settings)
    Site.objects.filter(pk=site.pk).update(last_due_at=latest - timedelta(days=7))
    schedules.run_due(site.pk, latest.isoformat())
    missed = list(SkippedRun.objects.filter(site=site).order_by("due_at"))
    assert len(missed) == schedules.MISSED_RECORDED
    assert missed[0].due_at == latest - timedelta(days=7) + timedelta(hours=1)
    assert "Every run time from this one to" in missed[-1].detail


def test_skipped_runs_older_than_ninety_days_are_pruned_and_the_admin_lists_the_recent(
        owner, client, django_user_model):
    from django.urls import reverse

    client.force_login(django_user_model.objects.create_superuser("boss", password="boss-pass-123"))
    site = scheduled_site(owner)
    for days in (200, 100, 20, 1):
        row = SkippedRun.objects.create(site=site, due_at=timezone.now() - timedelta(days=days),
                                        reason=SkippedRun.Reason.STILL_RUNNING, detail=f"{days} days ago")
        SkippedRun.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(days=days))
    assert "deleted 2 skipped run(s) older than 90 days" in run_watchdog()
    assert sorted(SkippedRun.objects.values_list("detail", flat=True)) == ["1 days ago", "20 days ago"]
    page = client.get(reverse("admin:audits_site_change", args=[site.pk])).content.decode()
    assert "1 days ago" in page and "20 days ago" not in page


def test_a_second_schedule_row_of_a_site_is_dropped_by_the_next_save_or_watchdog_pass(owner, settings):
    # django-q2's Schedule.name is not unique: a save and a watchdog's heal at once can each insert one.
    site = scheduled_site(owner)
    original = Schedule.objects.get(name=site.schedule_name)
    Schedule.objects.create(name=site.schedule_name, func=original.func, args=original.args,
                            schedule_type=Schedule.CRON, cron=original.cron, repeats=-1)
    assert f"removed 1 second schedule(s) of site {site.pk}" in schedules.heal()
    assert Schedule.objects.filter(name=site.schedule_name).count() == 1
    Schedule.objects.create(name=site.schedule_name, func=original.func, args=original.args,
                            schedule_type=Schedule.CRON, cron=original.cron, repeats=-1)
    site.hour = 5
    schedules.sync(site)  # update_or_create would raise MultipleObjectsReturned
    assert list(Schedule.objects.filter(name=site.schedule_name).values_list("pk", flat=True)) == [original.pk]


# What another request does to the site between a fire's first read of it and its lock.
CHANGED_MEANWHILE = {"paused": {"paused": True}, "deleted": {"deleting": True},
                     "unscheduled": {"cadence": Site.Cadence.NONE}}


def _changed_before_the_lock(monkeypatch, change: dict) -> None:
    lock_site = schedules.lock_site

    def lock_after_the_change(site):
        Site.objects.filter(pk=site.pk).update(**change)
        return lock_site(site)

    monkeypatch.setattr(schedules, "lock_site", lock_after_the_change)


@pytest.mark.parametrize("change", CHANGED_MEANWHILE.values(), ids=CHANGED_MEANWHILE.keys())
def test_a_fire_starts_nothing_on_a_site_paused_or_deleted_before_it_took_the_lock(owner, settings, monkeypatch,
                                                                                     change):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = scheduled_site(owner)
    _changed_before_the_lock(monkeypatch, change)
    assert schedules.run_due(site.pk, due_now(site)) == f"site {site.pk} is not scheduled"
    assert not Audit.objects.filter(site=site).exists()


def test_a_fire_starts_the_audit_with_the_settings_the_site_has_when_locked(owner, settings, monkeypatch):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}
    site = scheduled_site(owner, max_pages=33)
    _changed_before_the_lock(monkeypatch, {"max_pages": 44})
    schedules.run_due(site.pk, due_now(site))
    assert Audit.objects.get(site=site).max_pages == 44


@pytest.mark.parametrize("change", CHANGED_MEANWHILE.values(), ids=CHANGED_MEANWHILE.keys())
def test_a_held_back_run_starts_nothing_on_a_site_paused_or_deleted_before_the_lock(owner, settings, monkeypatch,
                                                                                    change):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "MAX_RUNNING_AUDITS_PER_USER": 1}
    other = make_audit(owner, start_url="https://elsewhere.example/", status=Audit.Status.RUNNING)
    site = scheduled_site(owner)
    schedules.run_due(site.pk, due_now(site))
    Audit.objects.filter(pk=other.pk).update(status=Audit.Status.COMPLETED)
    _changed_before_the_lock(monkeypatch, change)
    assert schedules.start_waiting() == []
    assert not Audit.objects.filter(site=site).exists()


def test_held_back_runs_of_an_owner_still_at_the_limit_do_not_hold_back_another_owners(
        owner, stranger, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "MAX_RUNNING_AUDITS_PER_USER": 1}
    make_audit(owner, start_url="https://elsewhere.example/", status=Audit.Status.RUNNING)
    crowd = [scheduled_site(owner, start_url=f"http://127.0.0.1:{9000 + n}/")
             for n in range(schedules.WAITING_PER_TICK + 1)]
    for site in crowd:  # held back first, so oldest
        schedules.run_due(site.pk, due_now(site))
    theirs = make_audit(stranger, start_url="https://theirs.example/", status=Audit.Status.RUNNING)
    site = scheduled_site(stranger)
    schedules.run_due(site.pk, due_now(site))
    Audit.objects.filter(pk=theirs.pk).update(status=Audit.Status.COMPLETED)
    started = schedules.start_waiting()
    audit = Audit.objects.filter(site=site).first()
    assert audit is not None and started == [f"started the held-back run of site {site.pk} as audit {audit.pk}"]
    assert SkippedRun.objects.filter(site__in=crowd, reason=SkippedRun.Reason.QUOTA).count() == len(crowd)


SCHEDULE_FORM = {"cadence": "daily", "minute": 0, "hour": 3, "weekday": 1, "time_zone": "UTC",
                 "notify_severity": ""}
# Two ways a person takes a site off its schedule, and puts it back.
OFF_AND_ON = {
    "paused": [("site-pause", {}), ("site-resume", {})],
    "unset": [("site-schedule", {**SCHEDULE_FORM, "cadence": ""}), ("site-schedule", SCHEDULE_FORM)],
}


@pytest.mark.parametrize("off_and_on", OFF_AND_ON.values(), ids=OFF_AND_ON.keys())
def test_a_held_back_run_is_dropped_when_the_schedule_is_paused_or_unset_and_never_starts_later(
        owner, owner_client, settings, off_and_on):
    from django.urls import reverse

    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "MAX_RUNNING_AUDITS_PER_USER": 1}
    other = make_audit(owner, start_url="https://elsewhere.example/", status=Audit.Status.RUNNING)
    site = scheduled_site(owner)
    schedules.run_due(site.pk, due_now(site))
    (off, off_data), (on, on_data) = off_and_on
    assert owner_client.post(reverse(off, args=[site.pk]), off_data).status_code == 302
    Audit.objects.filter(pk=other.pk).update(status=Audit.Status.COMPLETED)
    assert owner_client.post(reverse(on, args=[site.pk]), on_data).status_code == 302
    assert schedules.start_waiting() == []
    assert not Audit.objects.filter(site=site).exists()
    held = SkippedRun.objects.get(site=site)
    assert held.reason == SkippedRun.Reason.DROPPED and "paused or unset" in held.detail

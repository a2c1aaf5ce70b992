"""Every path that makes an audit active goes through services.admit: the running-audit quota and the
hourly creation limit hold for the form, re-run, resume, run now and the admin; the admin cannot edit
an audit's crawl facts or add one."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ

from audits import schedules
from audits.models import Audit, Site
from audits.services import RateLimited, create_audit, resume_audit
from tests.factories import make_audit, make_finished_audit

from .test_new_audit import GOOD

pytestmark = pytest.mark.django_db

QUOTA_FULL = "already have 1 audits queued or running"
RATE_FULL = "You have started 3 audits in the last hour, the most allowed"


@pytest.fixture
def quota_of_one(settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_RUNNING_AUDITS_PER_USER": 1}


@pytest.fixture
def three_an_hour(settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_RUNNING_AUDITS_PER_USER": 100, "MAX_AUDITS_PER_HOUR": 3}


def failed_audit(owner, **fields):
    return make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled", **fields)


def ended_manual_audits(owner, count, **fields):
    return [make_audit(owner, status=Audit.Status.COMPLETED, **fields) for _ in range(count)]


# --- the running-audit quota on every path ------------------------------------------------


def test_resume_from_the_audit_page_is_refused_past_the_quota(owner_client, owner, quota_of_one):
    make_finished_audit(owner, status=Audit.Status.RUNNING)
    failed = failed_audit(owner)
    response = owner_client.post(reverse("audit-resume", args=[failed.pk]), follow=True)
    assert QUOTA_FULL in response.content.decode()
    failed.refresh_from_db()
    assert failed.status == Audit.Status.FAILED and failed.error_code == "stalled"
    assert OrmQ.objects.count() == 0


def test_resuming_two_failed_audits_under_a_quota_of_one_starts_only_the_first(owner_client, owner, quota_of_one):
    first, second = failed_audit(owner), failed_audit(owner)
    owner_client.post(reverse("audit-resume", args=[first.pk]))
    response = owner_client.post(reverse("audit-resume", args=[second.pk]), follow=True)
    assert QUOTA_FULL in response.content.decode()
    assert Audit.objects.filter(status__in=Audit.ACTIVE).count() == 1


def test_resume_in_the_admin_is_refused_past_the_quota(superuser_client, owner, quota_of_one):
    make_finished_audit(owner, status=Audit.Status.RUNNING)
    failed = [failed_audit(owner), failed_audit(owner)]
    response = superuser_client.post(reverse("admin:audits_audit_changelist"),
                                     {"action": "resume_audits", "_selected_action": [a.pk for a in failed]},
                                     follow=True)
    body = response.content.decode()
    assert "Resumed 0 audit(s)" in body
    assert all(f"Audit {a.pk}: You {QUOTA_FULL}" in body for a in failed)
    assert Audit.objects.filter(status=Audit.Status.FAILED).count() == 2


def test_rerun_in_the_admin_is_refused_past_the_quota(superuser_client, owner, quota_of_one):
    make_finished_audit(owner, status=Audit.Status.RUNNING)
    done = make_finished_audit(owner)
    response = superuser_client.post(reverse("admin:audits_audit_changelist"),
                                     {"action": "rerun_audits", "_selected_action": [done.pk]}, follow=True)
    assert f"Audit {done.pk}: You {QUOTA_FULL}" in response.content.decode()
    assert Audit.objects.count() == 2


def test_rerun_from_the_audit_page_is_refused_past_the_quota(owner_client, owner, quota_of_one):
    make_finished_audit(owner, status=Audit.Status.RUNNING)
    done = make_finished_audit(owner)
    response = owner_client.post(reverse("audit-rerun", args=[done.pk]), follow=True)
    assert QUOTA_FULL in response.content.decode() and Audit.objects.count() == 2


def test_run_now_is_refused_past_the_quota(owner_client, owner, quota_of_one):
    make_finished_audit(owner, status=Audit.Status.RUNNING, start_url="https://other.example/")
    site = make_audit(owner, status=Audit.Status.COMPLETED).site
    response = owner_client.post(reverse("site-run", args=[site.pk]), follow=True)
    assert QUOTA_FULL in response.content.decode()
    assert site.audits.count() == 1


def test_resuming_an_audit_that_is_still_running_says_so_rather_than_quota(owner_client, owner, quota_of_one):
    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    response = owner_client.post(reverse("audit-resume", args=[running.pk]), follow=True)
    body = response.content.decode()
    assert "Only a failed or cancelled audit can be resumed" in body and QUOTA_FULL not in body


def test_the_command_is_not_held_to_the_quota(owner, quota_of_one):
    make_finished_audit(owner, status=Audit.Status.RUNNING)
    create_audit(owner, enforce_quota=False, trigger=Audit.Trigger.COMMAND, start_url="https://cli.example/")
    assert Audit.objects.filter(status__in=Audit.ACTIVE).count() == 2


# --- the hourly creation limit -----------------------------------------------------------


def test_the_creation_past_the_hourly_limit_is_refused_with_429(owner_client, owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_RUNNING_AUDITS_PER_USER": 100}
    per_hour = settings.SITEWARD["MAX_AUDITS_PER_HOUR"]
    assert per_hour == 30  # the default
    ended_manual_audits(owner, per_hour - 1)
    assert owner_client.post(reverse("audit-new"), GOOD).status_code == 302  # the 30th
    response = owner_client.post(reverse("audit-new"), GOOD)  # the 31st
    assert response.status_code == 429
    assert "You have started 30 audits in the last hour, the most allowed; try again in" in response.content.decode()
    assert 0 < int(response["Retry-After"]) <= 3600
    assert Audit.objects.count() == per_hour


def test_the_limit_is_a_rolling_hour(owner_client, owner, three_an_hour):
    old = ended_manual_audits(owner, 3)
    Audit.objects.filter(pk=old[0].pk).update(created_at=timezone.now() - timedelta(minutes=61))
    assert owner_client.post(reverse("audit-new"), GOOD).status_code == 302
    Audit.objects.filter(status=Audit.Status.QUEUED).update(status=Audit.Status.COMPLETED)  # one active a site
    response = owner_client.post(reverse("audit-new"), GOOD)
    assert response.status_code == 429 and RATE_FULL in response.content.decode()
    # A slot frees when the oldest of the hour's three is an hour old: here in about ten minutes.
    Audit.objects.filter(pk=old[1].pk).update(created_at=timezone.now() - timedelta(minutes=50))
    response = owner_client.post(reverse("audit-new"), GOOD)
    assert response.status_code == 429 and 590 <= int(response["Retry-After"]) <= 601
    assert "try again in 10 minute(s)" in response.content.decode()
    Audit.objects.filter(pk=old[1].pk).update(created_at=timezone.now() - timedelta(minutes=61))
    assert owner_client.post(reverse("audit-new"), GOOD).status_code == 302


def test_rerun_and_run_now_count_and_are_refused_past_the_hourly_limit(owner_client, owner, three_an_hour):
    done = make_finished_audit(owner)
    owner_client.post(reverse("audit-rerun", args=[done.pk]))
    # Run now waits for the site's queued audit to end (a second at once is refused), then counts too.
    Audit.objects.filter(status=Audit.Status.QUEUED).update(status=Audit.Status.COMPLETED)
    owner_client.post(reverse("site-run", args=[done.site.pk]))
    assert Audit.objects.count() == 3
    Audit.objects.filter(status=Audit.Status.QUEUED).update(status=Audit.Status.COMPLETED)
    response = owner_client.post(reverse("audit-rerun", args=[done.pk]), follow=True)
    assert RATE_FULL in response.content.decode()
    response = owner_client.post(reverse("site-run", args=[done.site.pk]), follow=True)
    assert RATE_FULL in response.content.decode()
    assert Audit.objects.count() == 3


def test_scheduled_and_command_audits_neither_count_nor_are_refused(owner_client, owner, three_an_hour):
    site = Site.objects.create(owner=owner, start_url="https://scheduled.example/", cadence=Site.Cadence.DAILY)
    schedules.sync(site)
    ended_manual_audits(owner, 2)
    ended_manual_audits(owner, 5, trigger=Audit.Trigger.SCHEDULE, start_url="https://s.example/")
    ended_manual_audits(owner, 5, trigger=Audit.Trigger.COMMAND, start_url="https://c.example/")
    assert owner_client.post(reverse("audit-new"), GOOD).status_code == 302  # the 3rd manual one
    assert owner_client.post(reverse("audit-new"), GOOD).status_code == 429
    due = site.next_run_after(timezone.now() - timedelta(days=8)).isoformat()
    assert schedules.run_due(site.pk, due).startswith("started audit")
    create_audit(owner, enforce_quota=False, trigger=Audit.Trigger.COMMAND, start_url="https://cli.example/")


def test_resume_is_not_a_creation(owner, three_an_hour):
    ended_manual_audits(owner, 3)
    failed = failed_audit(owner)  # a 4th creation, made directly
    assert resume_audit(failed) is True


def test_the_rate_limit_is_a_quota_exceeded_for_every_caller(owner, three_an_hour):
    ended_manual_audits(owner, 3)
    with pytest.raises(RateLimited) as refused:
        create_audit(owner, start_url="https://www.example.com/")
    assert refused.value.retry_after > 0


# --- the admin: no adding, no editing ------------------------------------------------------


def test_the_admin_shows_an_audits_crawl_settings_read_only(superuser_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled")
    response = superuser_client.get(reverse("admin:audits_audit_change", args=[audit.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert audit.start_url in body
    for field in ("start_url", "allow_private", "owner", "site", "max_pages", "concurrency", "include_patterns"):
        assert f'name="{field}"' not in body
    assert 'name="_save"' not in body


def test_posting_a_changed_start_url_in_the_admin_changes_nothing(superuser_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled")
    url = reverse("admin:audits_audit_change", args=[audit.pk])
    response = superuser_client.post(url, {
        "start_url": "http://169.254.169.254/latest/meta-data/", "allow_private": "on", "owner": owner.pk,
        "site": audit.site_id, "max_pages": "100000", "max_depth": "10", "concurrency": "64", "_save": "Save",
    })
    assert response.status_code == 403
    audit.refresh_from_db()
    assert audit.start_url == "https://shop.example/" and not audit.allow_private and audit.max_pages == 500


def test_the_admin_cannot_add_an_audit(superuser_client):
    assert superuser_client.get(reverse("admin:audits_audit_add")).status_code == 403
    changelist = superuser_client.get(reverse("admin:audits_audit_changelist")).content.decode()
    assert reverse("admin:audits_audit_add") not in changelist

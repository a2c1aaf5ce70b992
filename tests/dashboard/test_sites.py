"""Sites in the dashboard: the list, a site's history, trend and schedule, the diff panel and compare view."""

import csv
import io
import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django_q.models import Schedule

from audits import diff
from audits.models import Audit, Issue, LinkEdge, Site, SkippedRun
from tests.factories import SITE, make_audit, make_finished_audit, make_issue

pytestmark = pytest.mark.django_db


def two_audits(owner):
    """Two completed audits of one site: the second fixed a broken link and has a new issue."""
    first = make_finished_audit(owner)
    second = make_finished_audit(owner)
    # The link itself goes, as a fix does: a link still there to a 404 would not be fixed.
    Issue.objects.filter(audit=second, code="broken_link_internal", url=f"{SITE}/about").delete()
    LinkEdge.objects.filter(audit=second, source_url=f"{SITE}/about", target_url=f"{SITE}/gone").delete()
    make_issue(second, "h1_missing", f"{SITE}/blog/")
    Audit.objects.filter(pk=second.pk).update(issues_critical=2, issues_warning=2)
    second.refresh_from_db()
    diff.record(second)
    return first, second


def test_an_audit_from_the_form_reuses_the_owners_site_for_the_same_normalised_url(owner, stranger):
    first = make_audit(owner, start_url="https://shop.example/")
    again = make_audit(owner, start_url="https://shop.example/", max_pages=50)
    other = make_audit(stranger, start_url="https://shop.example/")
    assert first.site_id == again.site_id != other.site_id
    assert Site.objects.get(pk=first.site_id).max_pages == 50  # the latest settings are the site's


def test_the_site_list_shows_the_latest_audit_with_its_change_since_the_previous(owner_client, owner):
    first, second = two_audits(owner)
    body = owner_client.get(reverse("site-list")).content.decode()
    assert body.count('class="site"') == 1
    assert second.get_absolute_url() in body and first.get_absolute_url() not in body
    assert "1 new" in body and "1 fixed" in body
    assert '<small class="delta better">-1</small>' in body  # 3 critical -> 2
    assert '<small class="delta worse">+1</small>' in body  # 1 warning -> 2


def test_the_site_list_counts_the_latest_full_audit_not_a_recheck(owner_client, owner):
    first, second = two_audits(owner)
    # A re-check fetched only the URLs with issues: its counts are a part of the site's.
    check = make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=second, baseline=second)
    Audit.objects.filter(pk=check.pk).update(pages_crawled=2, issues_critical=1, issues_warning=0, issues_notice=0)
    body = owner_client.get(reverse("site-list")).content.decode()
    row = body.split('class="site"')[1].split("</tr>")[0]
    assert second.get_absolute_url() in row and check.get_absolute_url() not in row
    assert [int(n) for n in re.findall(r'<td class="sev-count">(\d+)', row)] == [2, 2, 1]
    assert '<small class="delta better">-1</small>' in row and '<small class="delta worse">+1</small>' in row
    assert "1 new" in row and "1 fixed" in row


def test_the_site_page_shows_history_trend_and_schedule(owner_client, owner):
    first, second = two_audits(owner)
    body = owner_client.get(second.site.get_absolute_url()).content.decode()
    assert f'data-audit="{first.pk}"' in body and f'data-audit="{second.pk}"' in body
    assert 'id="trend-issues"' in body and 'data-series="Critical"' in body and 'id="trend-pages"' in body
    assert 'id="schedule-form"' in body and 'id="run-now"' in body


@time_machine.travel(datetime(2026, 12, 5, 12, 0, tzinfo=UTC), tick=False)
def test_the_site_page_shows_audit_times_in_the_sites_zone_like_its_next_run(owner_client, owner):
    audit = make_finished_audit(owner)
    make_finished_audit(owner)  # two points make a trend
    Site.objects.filter(pk=audit.site_id).update(cadence="daily", hour=2, minute=0, time_zone="America/New_York")
    # The 02:00 run in New York is 07:00 UTC.
    Audit.objects.filter(pk=audit.pk).update(created_at=datetime(2026, 12, 5, 7, 0, tzinfo=UTC))
    body = owner_client.get(reverse("site-detail", args=[audit.site_id])).content.decode()
    assert re.search(r'id="next-run">[^<]* 02:00 EST<', body)
    row = re.search(rf'<tr data-audit="{audit.pk}">.*?</tr>', body, re.S).group(0)
    assert "2026-12-05 02:00 EST" in row
    assert "12-05 02:00 EST" in body[body.index('id="trend-issues"'):]


def test_strangers_get_404_from_every_site_url(client, owner, stranger):
    first, second = two_audits(owner)
    client.force_login(stranger)
    site = second.site
    for name in ("site-detail",):
        assert client.get(reverse(name, args=[site.pk])).status_code == 404
    for name in ("site-schedule", "site-pause", "site-resume", "site-run", "site-delete"):
        assert client.post(reverse(name, args=[site.pk])).status_code == 404
    assert client.get(reverse("audit-compare", args=[second.pk, first.pk])).status_code == 404
    assert client.get(reverse("export-changes", args=[second.pk])).status_code == 404
    assert Site.objects.filter(pk=site.pk).exists()


def test_a_daily_schedule_saved_on_the_site_page_becomes_a_django_q_schedule(owner_client, owner):
    site = make_audit(owner).site
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), {
        "cadence": "daily", "minute": 30, "hour": 2, "weekday": 1, "cron": "", "time_zone": "Europe/Berlin",
        "notify_severity": "critical", "notify_on_failure": "on", "notify_email": "on", "webhook_url": "",
    })
    assert response.status_code == 302
    schedule = Schedule.objects.get(name=f"site-{site.pk}")
    assert schedule.func == "audits.tasks.scheduled_run" and schedule.cron == "30 2 * * *"
    site.refresh_from_db()
    # 02:30 in Berlin, whatever the deployment's TIME_ZONE.
    assert schedule.next_run == site.next_run_after()
    assert schedule.next_run.astimezone(site.zone()).strftime("%H:%M") == "02:30"
    assert site.scheduled_mode == "full"  # not given: full crawls, as before the choice existed


def test_a_schedule_can_be_saved_to_run_delta_crawls(owner_client, owner):
    site = make_audit(owner).site
    owner_client.post(reverse("site-schedule", args=[site.pk]), {
        "cadence": "daily", "minute": 30, "hour": 2, "weekday": 1, "cron": "", "time_zone": "UTC",
        "scheduled_mode": "delta", "notify_severity": "critical", "webhook_url": "",
    })
    site.refresh_from_db()
    assert site.scheduled_mode == "delta"
    assert "Re-crawl changes (reuse unchanged pages)" in owner_client.get(site.get_absolute_url()).content.decode()

    owner_client.post(reverse("site-pause", args=[site.pk]))
    assert not Schedule.objects.filter(name=f"site-{site.pk}").exists()
    owner_client.post(reverse("site-resume", args=[site.pk]))
    assert Schedule.objects.filter(name=f"site-{site.pk}").exists()

    site.delete()
    assert not Schedule.objects.filter(name=f"site-{site.pk}").exists()


@pytest.mark.parametrize("cron, error", [
    ("every night", "Not a cron expression"),
    ("*/5 * * * *", "at most once every 60 minutes"),
    ("", "Write a cron expression"),
])
def test_a_bad_or_too_frequent_cron_expression_is_refused_with_a_message(owner_client, owner, cron, error):
    site = make_audit(owner).site
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), {
        "cadence": "cron", "minute": 0, "hour": 3, "weekday": 1, "cron": cron, "time_zone": "UTC",
        "notify_severity": "critical",
    })
    assert response.status_code == 400
    assert error in response.content.decode()
    assert not Schedule.objects.filter(name=f"site-{site.pk}").exists()


@pytest.mark.parametrize("cron", ["0 0 31 2 *", "0 0 30 2 *"])
def test_a_cron_expression_for_a_date_that_never_comes_is_refused_with_a_message(owner_client, owner, cron):
    site = make_audit(owner).site
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), {
        "cadence": "cron", "minute": 0, "hour": 3, "weekday": 1, "cron": cron, "time_zone": "UTC",
        "notify_severity": "critical",
    })
    assert response.status_code == 400
    assert "never runs" in " ".join(response.context["form"].errors["cron"])
    assert not Schedule.objects.filter(name=f"site-{site.pk}").exists()


def test_scheduling_more_sites_than_the_quota_is_refused(owner_client, owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_SCHEDULED_SITES_PER_USER": 1}
    first = make_audit(owner, start_url="https://one.example/").site
    second = make_audit(owner, start_url="https://two.example/").site
    data = {"cadence": "hourly", "minute": 5, "hour": 0, "weekday": 1, "time_zone": "UTC", "notify_severity": ""}
    assert owner_client.post(reverse("site-schedule", args=[first.pk]), data).status_code == 302
    response = owner_client.post(reverse("site-schedule", args=[second.pk]), data)
    assert response.status_code == 400 and "scheduled sites" in response.content.decode()


def test_saving_the_schedule_keeps_what_a_run_fired_meanwhile_wrote_on_the_site(owner_client, owner, monkeypatch):
    from audits.forms import SiteScheduleForm

    site = make_audit(owner).site
    fired = timezone.now().replace(microsecond=0)
    clean = SiteScheduleForm.clean

    def clean_while_a_run_fires(form):
        Site.objects.filter(pk=site.pk).update(last_due_at=fired, max_pages=77)
        return clean(form)

    monkeypatch.setattr(SiteScheduleForm, "clean", clean_while_a_run_fires)
    data = {"cadence": "daily", "minute": 5, "hour": 3, "weekday": 1, "time_zone": "UTC", "notify_severity": ""}
    assert owner_client.post(reverse("site-schedule", args=[site.pk]), data).status_code == 302
    site.refresh_from_db()
    assert (site.cadence, site.hour, site.last_due_at, site.max_pages) == ("daily", 3, fired, 77)


DAILY_AT_THREE = {"cadence": "daily", "minute": 0, "hour": 3, "weekday": 1, "time_zone": "UTC",
                  "notify_severity": "critical", "webhook_url": ""}


def scheduled_with_a_run_not_yet_fired(owner_client, owner) -> tuple[Site, datetime, datetime]:
    """A site scheduled daily at 03:00 a week ago, whose 03:00 run no cluster has fired yet (one was down)."""
    site = make_audit(owner).site
    owner_client.post(reverse("site-schedule", args=[site.pk]), DAILY_AT_THREE)
    due = timezone.now().replace(hour=3, minute=0, second=0, microsecond=0)
    set_at = timezone.now().replace(microsecond=0) - timedelta(days=7)
    Schedule.objects.filter(name=site.schedule_name).update(next_run=due - timedelta(days=1))
    Site.objects.filter(pk=site.pk).update(schedule_set_at=set_at)
    return site, due - timedelta(days=1), set_at


@pytest.mark.parametrize("alerts", [{"notify_severity": "warning"}, {"notify_email": "on"},
                                    {"scheduled_mode": "delta"}])
def test_saving_only_the_alerts_or_the_run_mode_keeps_the_run_a_cluster_has_yet_to_fire(owner_client, owner, alerts):
    site, not_fired, set_at = scheduled_with_a_run_not_yet_fired(owner_client, owner)
    assert owner_client.post(reverse("site-schedule", args=[site.pk]), {**DAILY_AT_THREE, **alerts}).status_code == 302
    site.refresh_from_db()
    assert Schedule.objects.get(name=site.schedule_name).next_run == not_fired
    assert site.schedule_set_at == set_at


@pytest.mark.parametrize("change", [{"hour": 4}, {"time_zone": "Asia/Tokyo"}, {"cadence": "hourly"}])
def test_changing_the_run_times_sets_the_schedule_anew_from_now(owner_client, owner, change):
    site, not_fired, set_at = scheduled_with_a_run_not_yet_fired(owner_client, owner)
    assert owner_client.post(reverse("site-schedule", args=[site.pk]), {**DAILY_AT_THREE, **change}).status_code == 302
    site.refresh_from_db()
    assert Schedule.objects.get(name=site.schedule_name).next_run == site.next_run_after() > timezone.now()
    assert site.schedule_set_at > set_at


def test_run_now_queues_an_audit_with_the_sites_settings(owner_client, owner):
    site = make_audit(owner, max_pages=42, status=Audit.Status.COMPLETED).site
    response = owner_client.post(reverse("site-run", args=[site.pk]))
    audit = Audit.objects.filter(site=site).order_by("-pk").first()
    assert response.status_code == 302 and response["Location"] == audit.get_absolute_url()
    assert audit.max_pages == 42 and audit.trigger == Audit.Trigger.MANUAL and audit.status == "queued"


def test_the_audit_page_says_what_changed_since_the_previous_audit(owner_client, owner):
    first, second = two_audits(owner)
    body = owner_client.get(second.get_absolute_url()).content.decode()
    assert 'id="changes"' in body
    assert reverse("audit-compare", args=[second.pk, first.pk]) in body
    assert f"{reverse('issue-list', args=[second.pk])}?change=new&amp;severity=warning" in body

    no_baseline = owner_client.get(first.get_absolute_url()).content.decode()
    assert 'id="changes"' not in no_baseline and 'id="no-baseline"' in no_baseline


def test_the_issue_table_filters_by_change(owner_client, owner):
    first, second = two_audits(owner)
    url = reverse("issue-list", args=[second.pk])
    new = owner_client.get(url, {"change": "new"}).content.decode()
    assert new.count('class="issue"') == 1 and 'data-code="h1_missing"' in new
    fixed = owner_client.get(url, {"change": "fixed"}).content.decode()
    assert fixed.count('class="issue"') == 1 and 'data-code="broken_link_internal"' in fixed
    persisting = owner_client.get(url, {"change": "persisting"}).content.decode()
    assert persisting.count('class="issue"') == Issue.objects.filter(audit=second).count() - 1


@pytest.mark.parametrize(("which", "change", "said"), [
    ("older", {"status": Audit.Status.RUNNING}, "is still running"),
    ("newer", {"status": Audit.Status.QUEUED}, "is still running"),
    ("older", {"deleting": True}, "is being deleted, so it can no longer be compared"),
])
def test_the_compare_view_refuses_a_running_audit_or_one_being_deleted_and_says_why(
        owner_client, owner, which, change, said):
    first, second = two_audits(owner)
    changed = first if which == "older" else second
    Audit.objects.filter(pk=changed.pk).update(**change)
    url = reverse("audit-compare", args=[second.pk, first.pk])
    response = owner_client.get(url)
    assert response.status_code == 302 and response["Location"] == second.get_absolute_url()
    page = owner_client.get(response["Location"]).content.decode()
    assert f"Audit {changed.pk} {said}" in page and 'data-show="new"' not in page
    # A tab of the compare page, swapped over htmx, sends the browser to the same place.
    swapped = owner_client.get(url, {"show": "fixed"}, HTTP_HX_REQUEST="true")
    assert swapped.status_code == 200 and swapped["HX-Redirect"] == second.get_absolute_url()
    assert 'data-code="broken_link_internal"' not in swapped.content.decode()


def test_the_compare_view_still_compares_an_audit_that_failed(owner_client, owner):
    first, second = two_audits(owner)
    Audit.objects.filter(pk=first.pk).update(status=Audit.Status.FAILED, error_code="stalled")
    body = owner_client.get(reverse("audit-compare", args=[second.pk, first.pk])).content.decode()
    assert 'data-show="new"' in body and "failed" in body


def test_the_compare_view_lists_each_kind_of_change_for_any_two_audits_of_a_site(owner_client, owner):
    first, second = two_audits(owner)
    url = reverse("audit-compare", args=[second.pk, first.pk])
    body = owner_client.get(url).content.decode()
    assert 'data-show="new"' in body and 'data-code="h1_missing"' in body
    fixed = owner_client.get(url, {"show": "fixed"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fixed and 'data-code="broken_link_internal"' in fixed
    # Either order: the older audit is the baseline.
    reversed_body = owner_client.get(reverse("audit-compare", args=[first.pk, second.pk])).content.decode()
    assert 'data-code="h1_missing"' in reversed_body

    elsewhere = make_finished_audit(owner, start_url="https://other.example/")
    assert owner_client.get(reverse("audit-compare", args=[second.pk, elsewhere.pk])).status_code == 404

    # Compared live (no stored diff), a page past the end of a list (a bookmark on one that shrank)
    # shows its first page, not "nothing".
    Audit.objects.filter(pk=second.pk).update(change_counts=None)
    past = owner_client.get(url, {"show": "fixed", "page": 50}, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-code="broken_link_internal"' in past


def test_changes_csv_lists_new_fixed_and_persisting_issues_formula_safe(owner_client, owner):
    first, second = two_audits(owner)
    make_issue(second, "title_missing", f"{SITE}/=cmd", message="=HYPERLINK(\"http://evil\")")
    diff.record(second)
    response = owner_client.get(reverse("export-changes", args=[second.pk]))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    assert rows[0] == ["change", "kind", "severity", "code", "title", "url", "target_url", "detail"]
    changes = {(row[0], row[3]) for row in rows[1:]}
    assert ("new", "h1_missing") in changes and ("fixed", "broken_link_internal") in changes
    assert ("persisting", "meta_description_missing") in changes
    assert all(not cell.startswith("=") for row in rows for cell in row)


def test_changes_csv_leaves_out_ignored_issues_as_the_panel_does(owner_client, owner):
    first, second = two_audits(owner)
    diff.record(second)
    Issue.objects.filter(audit=second, code="h1_missing").update(review=Issue.Review.IGNORED)
    response = owner_client.get(reverse("export-changes", args=[second.pk]))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    codes = {row[3] for row in rows[1:]}
    assert "h1_missing" not in codes and "meta_description_missing" in codes


def test_a_site_whose_only_audit_left_is_a_recheck_lists_that_recheck(owner_client, owner):
    _, second = two_audits(owner)
    check = make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=second, baseline=second)
    Audit.objects.exclude(pk=check.pk).delete()
    row = owner_client.get(reverse("site-list")).content.decode().split('class="site"')[1].split("</tr>")[0]
    assert check.get_absolute_url() in row and "No audit yet" not in row


@pytest.mark.parametrize("listing", ["audit-list", "site-list"])
def test_the_lists_never_read_an_audits_robots_txt(owner_client, owner, listing):
    # Up to 512 KB an audit: 25 rows of it would be read for nothing.
    make_finished_audit(owner)
    with CaptureQueriesContext(connection) as ctx:
        assert owner_client.get(reverse(listing)).status_code == 200
    assert [q["sql"] for q in ctx.captured_queries if "audits_audit" in q["sql"]]
    assert not [q["sql"] for q in ctx.captured_queries if "robots_body" in q["sql"]]


def test_the_site_list_says_how_many_scheduled_runs_in_a_row_were_skipped_and_why(owner_client, owner):
    quiet = make_finished_audit(owner, start_url="https://quiet.example/")
    audit = make_finished_audit(owner, trigger=Audit.Trigger.SCHEDULE)
    Site.objects.filter(pk__in=[quiet.site_id, audit.site_id]).update(cadence=Site.Cadence.DAILY)
    site = Site.objects.get(pk=audit.site_id)
    earlier, later = audit.created_at - timedelta(days=1), audit.created_at + timedelta(days=1)

    def skip(at, reason, on=site):
        run = SkippedRun.objects.create(site=on, due_at=at, reason=reason)
        SkippedRun.objects.filter(pk=run.pk).update(created_at=at)  # auto_now_add

    def row_of(some_site) -> str:
        body = owner_client.get(reverse("site-list")).content.decode()
        return body.split(f'data-site="{some_site.pk}"')[1].split("</tr>")[0]

    skip(earlier, SkippedRun.Reason.MISSED)  # before the latest scheduled audit: not news
    skip(later, SkippedRun.Reason.STARTED_LATE)  # it did run
    skip(later + timedelta(days=1), SkippedRun.Reason.MISSED)
    skip(later + timedelta(days=2), SkippedRun.Reason.STILL_RUNNING)
    row = row_of(site)
    assert "2 runs in a row skipped" in row
    assert f'href="{site.get_absolute_url()}#skipped-runs"' in row
    assert SkippedRun.Reason.STILL_RUNNING.label in row  # the newest one's reason
    assert "skipped" not in row_of(quiet.site)
    # A run held back by the running-audit limit that may still start is waiting, not skipped; once the
    # schedule has fired again without starting it, it was skipped.
    held = later + timedelta(days=3)
    skip(held, SkippedRun.Reason.QUOTA)
    Site.objects.filter(pk=site.pk).update(last_due_at=held)
    assert "2 runs in a row skipped" in row_of(site)
    Site.objects.filter(pk=site.pk).update(last_due_at=held + timedelta(days=1))
    assert "3 runs in a row skipped" in row_of(site)
    # A scheduled run that started after them ends the series; one being deleted is gone from the list already.
    newer = make_finished_audit(owner, trigger=Audit.Trigger.SCHEDULE)
    Audit.objects.filter(pk=newer.pk).update(created_at=held + timedelta(days=2))
    assert "skipped" not in row_of(site)
    Audit.objects.filter(pk=newer.pk).update(deleting=True)
    assert "3 runs in a row skipped" in row_of(site)
    # A paused schedule's skips are history, not a warning; resumed, they were another schedule's.
    Site.objects.filter(pk=site.pk).update(paused=True)
    assert "skipped" not in row_of(site)
    Site.objects.filter(pk=site.pk).update(paused=False, schedule_set_at=held + timedelta(days=3))
    assert "skipped" not in row_of(site)
    # A site with no scheduled audit yet counts from when its schedule went live.
    skip(later, SkippedRun.Reason.PRIVATE_REFUSED, on=quiet.site)
    assert "1 run in a row skipped" in row_of(quiet.site)

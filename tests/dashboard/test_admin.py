"""The admin: review actions on issues, audit actions, and django-q2's admin for superusers only."""

import pytest
from django.urls import reverse

from audits.models import Audit, Issue, Page, Site
from tests.factories import make_finished_audit

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_user("reviewer", password="reviewer-pass-1", is_staff=True)
    from django.contrib.auth.models import Permission

    user.user_permissions.set(Permission.objects.filter(content_type__app_label__in=["audits", "django_q"]))
    client.force_login(user)
    return client


def test_marking_issues_reviewed_and_ignored_shows_in_the_dashboard(superuser_client, owner):
    audit = make_finished_audit(owner)
    broken = list(Issue.objects.filter(code="broken_link_internal").values_list("pk", flat=True))
    notice = Issue.objects.get(code="title_length")
    url = reverse("admin:audits_issue_changelist")
    superuser_client.post(url, {"action": "mark_reviewed", "_selected_action": broken})
    superuser_client.post(url, {"action": "mark_ignored", "_selected_action": [notice.pk]})
    assert set(Issue.objects.filter(review="reviewed").values_list("pk", flat=True)) == set(broken)
    assert Issue.objects.get(pk=notice.pk).review == "ignored"

    superuser_client.force_login(owner)
    body = superuser_client.get(reverse("issue-list", args=[audit.pk])).content.decode()
    assert body.count('class="review review-reviewed"') == 2 and body.count('class="review review-ignored"') == 1
    reviewed = superuser_client.get(reverse("issue-list", args=[audit.pk]), {"review": "reviewed"})
    assert reviewed.content.decode().count('class="issue"') == 2


def test_admin_actions_cancel_resume_and_rerun_audits(superuser_client, owner):
    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    failed = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled",
                                 start_url="https://other.example/")
    url = reverse("admin:audits_audit_changelist")
    superuser_client.post(url, {"action": "cancel_audits", "_selected_action": [running.pk]})
    superuser_client.post(url, {"action": "resume_audits", "_selected_action": [failed.pk]})
    running.refresh_from_db()
    failed.refresh_from_db()
    assert running.status == Audit.Status.CANCELLED and failed.status == Audit.Status.QUEUED
    superuser_client.post(url, {"action": "rerun_audits", "_selected_action": [running.pk]})
    assert Audit.objects.count() == 3


def test_admin_actions_refuse_to_resume_or_rerun_private_targets_once_the_setting_is_off(superuser_client, owner):
    failed = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled", allow_private=True,
                                 start_url="http://127.0.0.1:8000/")
    url = reverse("admin:audits_audit_changelist")
    for action in ("resume_audits", "rerun_audits"):
        response = superuser_client.post(url, {"action": action, "_selected_action": [failed.pk]}, follow=True)
        assert f"Audit {failed.pk} targeted a private address, which is no longer allowed." in response.content.decode()
    failed.refresh_from_db()
    assert failed.status == Audit.Status.FAILED and Audit.objects.count() == 1


def test_the_audit_changelist_filters_by_status_and_error_code(superuser_client, owner):
    make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled", start_url="https://a.example/")
    make_finished_audit(owner, start_url="https://b.example/")
    body = superuser_client.get(reverse("admin:audits_audit_changelist"), {"error_code": "stalled"}).content.decode()
    assert "a.example" in body and "b.example" not in body
    body = superuser_client.get(reverse("admin:audits_audit_changelist"), {"q": "b.example"}).content.decode()
    assert "b.example" in body and "7 / 7 pages" in body


def test_django_q_admin_is_hidden_from_staff_without_superuser(staff_client):
    assert staff_client.get(reverse("admin:audits_issue_changelist")).status_code == 200
    index = staff_client.get(reverse("admin:index")).content.decode()
    assert "django_q" not in index and "Scheduled tasks" not in index
    for model in ("schedule", "success", "failure", "ormq"):
        assert staff_client.get(reverse(f"admin:django_q_{model}_changelist")).status_code == 403


def test_django_q_admin_is_open_to_superusers(superuser_client):
    for model in ("schedule", "success", "failure", "ormq"):
        assert superuser_client.get(reverse(f"admin:django_q_{model}_changelist")).status_code == 200


def test_a_site_scheduled_and_paused_in_the_admin_keeps_its_django_q_schedule_in_step(superuser_client, owner):
    from django_q.models import Schedule

    from audits.models import Site

    site = make_finished_audit(owner).site
    change = reverse("admin:audits_site_change", args=[site.pk])
    form = superuser_client.get(change).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update(owner=owner.pk, cadence="weekly", weekday=3, hour=6, minute=45, time_zone="Europe/Paris",
                notify_severity="warning", webhook_url="")
    data = {k: v for k, v in data.items() if v is not False}
    response = superuser_client.post(change, {**data, "skipped_runs-TOTAL_FORMS": 0,
                                              "skipped_runs-INITIAL_FORMS": 0})
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Schedule.objects.get(name=f"site-{site.pk}").cron == "45 6 * * 3"

    superuser_client.post(reverse("admin:audits_site_changelist"),
                          {"action": "pause_schedules", "_selected_action": [site.pk]})
    assert Site.objects.get(pk=site.pk).paused and not Schedule.objects.filter(name=f"site-{site.pk}").exists()
    superuser_client.post(reverse("admin:audits_site_changelist"),
                          {"action": "resume_schedules", "_selected_action": [site.pk]})
    assert Schedule.objects.filter(name=f"site-{site.pk}").exists()


def test_no_one_adds_audits_pages_or_issues_in_the_admin(superuser_client, owner):
    audit = make_finished_audit(owner)
    for model in ("audit", "page", "issue", "notification"):
        assert superuser_client.get(reverse(f"admin:audits_{model}_add")).status_code == 403
        changelist = superuser_client.get(reverse(f"admin:audits_{model}_changelist")).content.decode()
        assert reverse(f"admin:audits_{model}_add") not in changelist
    page = audit.pages.first()
    # A page is the crawl's record: viewed, never edited.
    response = superuser_client.post(reverse("admin:audits_page_change", args=[page.pk]),
                                     {"url": "https://forged.example/", "status_code": 200})
    assert response.status_code == 403 and Page.objects.get(pk=page.pk).url == page.url


def test_an_issues_crawl_facts_are_read_only_and_its_review_is_what_the_admin_edits(superuser_client, owner):
    audit = make_finished_audit(owner)
    issue = Issue.objects.get(audit=audit, code="title_length")
    change = reverse("admin:audits_issue_change", args=[issue.pk])
    form = superuser_client.get(change).context["adminform"].form
    assert list(form.fields) == ["review"]
    response = superuser_client.post(change, {
        "review": "ignored", "code": "http_5xx", "severity": "critical", "message": "forged", "key": "forged",
        "url": "https://forged.example/", "target_url": "https://forged.example/t", "created_at": "2000-01-01",
    })
    assert response.status_code == 302
    issue_after = Issue.objects.get(pk=issue.pk)
    assert issue_after.review == "ignored"
    assert [getattr(issue_after, f) for f in ("code", "severity", "message", "key", "url", "target_url",
                                              "created_at")] == \
        [getattr(issue, f) for f in ("code", "severity", "message", "key", "url", "target_url", "created_at")]
    # As in the dashboard, the ignored issue leaves the audit's totals.
    audit.refresh_from_db()
    assert audit.issues_notice == 0
    # Opened again here, it is a person's reopening, which the site's ignore rules respect.
    superuser_client.post(change, {"review": "open"})
    assert Issue.objects.filter(pk=issue.pk, review="open", reopened=True).exists()


def test_the_admins_review_actions_keep_each_audits_totals_in_step(superuser_client, owner):
    first, second = make_finished_audit(owner), make_finished_audit(owner)
    critical = list(Issue.objects.filter(severity="critical").values_list("pk", flat=True))
    superuser_client.post(reverse("admin:audits_issue_changelist"),
                          {"action": "mark_ignored", "_selected_action": critical})
    for audit in (first, second):
        audit.refresh_from_db()
        assert (audit.issues_critical, audit.issues_warning, audit.issues_notice) == (0, 1, 1)
    superuser_client.post(reverse("admin:audits_issue_changelist"),
                          {"action": "mark_open", "_selected_action": critical})
    first.refresh_from_db()
    assert first.issues_critical == 3


def site_change_data(client, site, **changes):
    """What the admin's Site page posts: its form as shown, with ``changes`` made."""
    form = client.get(reverse("admin:audits_site_change", args=[site.pk])).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and value is not False}
    data.update({"skipped_runs-TOTAL_FORMS": 0, "skipped_runs-INITIAL_FORMS": 0, "webhook_url": ""}, **changes)
    return {name: value for name, value in data.items() if value is not False}


@pytest.mark.parametrize("field, value", [
    ("max_pages", 10**9), ("max_depth", 30000), ("concurrency", 30000), ("rate", 1000),
    ("include_patterns", "("), ("exclude_patterns", "(a+)+$\n("), ("user_agent", "bot\r\nX-Evil: 1"),
])
def test_the_site_form_refuses_the_crawl_settings_the_new_audit_form_refuses(superuser_client, owner, field, value):
    site = make_finished_audit(owner).site
    response = superuser_client.post(reverse("admin:audits_site_change", args=[site.pk]),
                                     site_change_data(superuser_client, site, **{field: value}))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert getattr(Site.objects.get(pk=site.pk), field) == getattr(site, field)


def test_the_site_form_refuses_a_cron_expression_that_never_runs(superuser_client, owner):
    site = make_finished_audit(owner).site
    response = superuser_client.post(reverse("admin:audits_site_change", args=[site.pk]),
                                     site_change_data(superuser_client, site, cadence="cron", cron="0 0 31 2 *"))
    assert response.status_code == 200
    assert "never runs" in " ".join(response.context["adminform"].form.errors["cron"])


def test_a_sites_start_url_owner_and_private_permission_are_read_only(superuser_client, owner, stranger):
    site = make_finished_audit(owner).site
    change = reverse("admin:audits_site_change", args=[site.pk])
    assert 'name="start_url"' not in superuser_client.get(change).content.decode()
    response = superuser_client.post(change, site_change_data(
        superuser_client, site, start_url="javascript:alert(1)", owner=stranger.pk, allow_private="on",
        max_pages=42))
    assert response.status_code == 302
    saved = Site.objects.get(pk=site.pk)
    assert (saved.start_url, saved.owner_id, saved.allow_private) == (site.start_url, owner.pk, False)
    assert saved.max_pages == 42
    # Nor is a site made here: its first audit makes it, past the new-audit form's checks.
    assert superuser_client.get(reverse("admin:audits_site_add")).status_code == 403


def test_the_issue_changelist_lists_no_audit_in_its_sidebar_and_still_filters_by_one(superuser_client, owner):
    audits = [make_finished_audit(owner) for _ in range(3)]
    changelist = reverse("admin:audits_issue_changelist")
    assert "audit__id__exact" not in superuser_client.get(changelist).content.decode()
    one = superuser_client.get(changelist, {"audit__id__exact": audits[0].pk}).context["cl"]
    assert {issue.audit_id for issue in one.result_list} == {audits[0].pk}


def test_resuming_schedules_in_the_admin_holds_each_owners_limit_on_scheduled_sites(superuser_client, owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_SCHEDULED_SITES_PER_USER": 1}
    sites = [make_finished_audit(owner, start_url=f"https://{name}.example/").site for name in ("one", "two")]
    for site in sites:
        Site.objects.filter(pk=site.pk).update(cadence="daily", paused=True)
    response = superuser_client.post(reverse("admin:audits_site_changelist"),
                                     {"action": "resume_schedules", "_selected_action": [s.pk for s in sites]},
                                     follow=True)
    assert Site.objects.filter(owner=owner).scheduled().count() == 1
    assert "Not resumed" in response.content.decode()


def staff_with(django_user_model, client, name: str, codenames: list[str]):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(name, password=f"{name}-pass-123", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="audits", codename__in=codenames))
    client.force_login(user)
    return client


VIEW_ONLY = ["view_audit", "view_issue", "view_site"]


def test_staff_who_may_only_view_are_offered_no_action_and_change_nothing_posting_one(client, django_user_model,
                                                                                       owner):
    staff = staff_with(django_user_model, client, "viewer", VIEW_ONLY)
    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    failed = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled",
                                 start_url="https://other.example/")
    site = running.site
    Site.objects.filter(pk=site.pk).update(cadence="daily")
    issue = Issue.objects.filter(audit=running).first()
    posts = [("audit", "cancel_audits", running.pk), ("audit", "resume_audits", failed.pk),
             ("audit", "rerun_audits", failed.pk), ("issue", "mark_reviewed", issue.pk),
             ("issue", "mark_ignored", issue.pk), ("site", "pause_schedules", site.pk)]
    for model, action, pk in posts:
        changelist = reverse(f"admin:audits_{model}_changelist")
        offered = staff.get(changelist).content.decode()
        assert f'value="{action}"' not in offered
        staff.post(changelist, {"action": action, "_selected_action": [pk]})
    running.refresh_from_db()
    failed.refresh_from_db()
    assert running.status == Audit.Status.RUNNING and failed.status == Audit.Status.FAILED
    assert Audit.objects.count() == 2
    assert not Issue.objects.exclude(review="open").exists()
    assert not Site.objects.get(pk=site.pk).paused


def test_staff_who_may_change_audits_issues_and_sites_run_the_actions(client, django_user_model, owner):
    staff = staff_with(django_user_model, client, "operator", [*VIEW_ONLY, "change_audit", "change_issue",
                                                              "change_site"])
    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    issue = Issue.objects.filter(audit=running).first()
    assert 'value="cancel_audits"' in staff.get(reverse("admin:audits_audit_changelist")).content.decode()
    staff.post(reverse("admin:audits_audit_changelist"), {"action": "cancel_audits", "_selected_action": [running.pk]})
    staff.post(reverse("admin:audits_issue_changelist"), {"action": "mark_ignored", "_selected_action": [issue.pk]})
    staff.post(reverse("admin:audits_site_changelist"),
               {"action": "pause_schedules", "_selected_action": [running.site_id]})
    running.refresh_from_db()
    assert running.status == Audit.Status.CANCELLED
    assert Issue.objects.get(pk=issue.pk).review == "ignored"
    assert Site.objects.get(pk=running.site_id).paused


def test_saving_a_sites_alerts_in_the_admin_keeps_the_run_a_cluster_has_yet_to_fire(superuser_client, owner):
    from datetime import timedelta

    from django.utils import timezone
    from django_q.models import Schedule

    from audits import schedules

    site = make_finished_audit(owner).site
    Site.objects.filter(pk=site.pk).update(cadence=Site.Cadence.DAILY)
    site.refresh_from_db()
    schedules.sync(site)
    not_fired = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=5)
    Schedule.objects.filter(name=site.schedule_name).update(next_run=not_fired)
    response = superuser_client.post(reverse("admin:audits_site_change", args=[site.pk]),
                                     site_change_data(superuser_client, site, notify_severity="warning"))
    assert response.status_code == 302
    assert Schedule.objects.get(name=site.schedule_name).next_run == not_fired


def test_the_site_form_shows_a_refused_webhook_address_without_its_password(superuser_client, owner):
    site = make_finished_audit(owner).site
    response = superuser_client.post(reverse("admin:audits_site_change", args=[site.pk]), site_change_data(
        superuser_client, site, webhook_url="https://alerts:hunter2@www.example.com/hook"))
    assert response.status_code == 200 and "webhook_url" in response.context["adminform"].form.errors
    assert "hunter2" not in response.content.decode()


def _critical(audit):
    return list(Issue.objects.filter(audit=audit, severity="critical").order_by("pk"))


@pytest.mark.parametrize("action", ["mark_reviewed", "mark_open"])
def test_all_matching_issues_marked_in_the_admin_leave_the_ignored_ones_alone_unless_the_filter_asks_for_them(
        superuser_client, owner, action):
    audit = make_finished_audit(owner)
    chosen, ignored, _ = _critical(audit)
    audit.set_review(Issue.objects.filter(pk=ignored.pk), Issue.Review.IGNORED)
    changelist = reverse("admin:audits_issue_changelist")
    by_audit = f"audit__id__exact={audit.pk}&severity__exact=critical"
    everything = {"action": action, "select_across": "1", "_selected_action": [chosen.pk]}
    superuser_client.post(f"{changelist}?{by_audit}", everything)
    assert Issue.objects.filter(pk=ignored.pk, review="ignored", reopened=False).exists()
    if action == "mark_reviewed":
        assert Issue.objects.filter(pk=chosen.pk, review="reviewed").exists()

    # Filtered to the ignored ones, "all matching" is them: re-opened, as a person asked.
    superuser_client.post(f"{changelist}?{by_audit}&review__exact=ignored",
                          {**everything, "action": "mark_open", "_selected_action": [ignored.pk]})
    assert Issue.objects.filter(pk=ignored.pk, review="open", reopened=True).exists()


def test_all_matching_issues_of_more_than_one_audit_are_refused_in_the_admin(superuser_client, owner):
    first, second = make_finished_audit(owner), make_finished_audit(owner)
    changelist = reverse("admin:audits_issue_changelist")
    response = superuser_client.post(f"{changelist}?severity__exact=critical", {
        "action": "mark_reviewed", "select_across": "1", "_selected_action": [_critical(first)[0].pk]}, follow=True)
    assert "marks one audit&#x27;s issues at a time" in response.content.decode()
    assert not Issue.objects.exclude(review="open").exists()
    for audit in (first, second):
        audit.refresh_from_db()
        assert audit.issues_critical == 3
    # Ticked rows of several audits are a page at most: marked as chosen.
    ticked = [_critical(first)[0].pk, _critical(second)[0].pk]
    superuser_client.post(changelist, {"action": "mark_reviewed", "_selected_action": ticked})
    assert set(Issue.objects.filter(review="reviewed").values_list("pk", flat=True)) == set(ticked)


def test_a_sites_page_reads_its_skipped_runs_in_a_few_queries_however_many(superuser_client, owner,
                                                                        django_assert_max_num_queries):
    from audits.models import SkippedRun

    site = make_finished_audit(owner).site
    SkippedRun.objects.bulk_create(SkippedRun(site=site, due_at=site.created_at, reason=SkippedRun.Reason.QUOTA)
                                   for _ in range(30))
    with django_assert_max_num_queries(10):
        response = superuser_client.get(reverse("admin:audits_site_change", args=[site.pk]))
    assert response.status_code == 200 and response.content.decode().count(f"{site.start_url} skipped at") == 30

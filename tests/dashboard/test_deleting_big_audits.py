"""Deleting an audit or a site removes its rows a batch at a time, never in one statement a table.

An audit can hold millions of link edges: one cascading DELETE would hold
SQLite's write lock for minutes, or run into PostgreSQL's statement timeout.
"""

import re

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audits import admin as admin_module
from audits import purge, tasks
from audits.crawl.reuse import source_of
from audits.inlinks import ended_unindexed
from audits.models import Audit, Inlink, Issue, LinkEdge, Notification, Page, RecheckedIssue, Site
from audits.services import SourceGone, enqueue, follow_up, make_follow_up
from audits.watchdog import queued_task_names
from tests.factories import SITE, make_finished_audit, make_issue, make_link, make_page

pytestmark = pytest.mark.django_db

BIG_TABLES = ("audits_linkedge", "audits_issue", "audits_page", "audits_inlink")


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(purge, "BATCH", 5)


def _fill(audit, edges=12):
    for n in range(edges):
        edge = make_link(audit, f"{SITE}/", f"{SITE}/p/{n}")
        Inlink.objects.create(audit=audit, target_hash=edge.target_hash, tag="a", edge_id=edge.pk)
    return audit


def _deletes(queries, table):
    return [q["sql"] for q in queries if q["sql"].startswith("DELETE") and f"{table}" in q["sql"].split("WHERE")[0]]


def assert_batched(queries, table, at_least=1):
    """``table`` lost its rows through bounded statements. An unbounded DELETE is only the ORM's sweep
    when an audit row goes, after that audit's batches, over what a writer may have inserted meanwhile."""
    deletes = _deletes(queries, table)
    bounded = [n for n, sql in enumerate(deletes) if "LIMIT" in sql]
    assert len(bounded) >= at_least, deletes
    for n, sql in enumerate(deletes):
        if "LIMIT" not in sql:
            audit_id = re.search(r"IN \((\d+)\)$", sql).group(1)
            assert any(f"audit_id = {audit_id} LIMIT" in deletes[m] for m in bounded if m < n), deletes


def _rows(audit_id):
    return {model.__name__: model.objects.filter(audit_id=audit_id).count() for model in (LinkEdge, Issue, Page, Inlink)}


def test_deleting_an_audit_removes_its_rows_in_batches_and_leaves_other_audits_alone(owner_client, owner,
                                                                                     small_batches):
    doomed = _fill(make_finished_audit(owner))
    kept = _fill(make_finished_audit(owner))
    before = _rows(kept.pk)
    with CaptureQueriesContext(connection) as ctx:
        response = owner_client.post(reverse("audit-delete", args=[doomed.pk]))
    assert response.status_code == 302
    assert not Audit.objects.filter(pk=doomed.pk).exists()
    assert set(_rows(doomed.pk).values()) == {0}
    assert _rows(kept.pk) == before
    # 12 edges in batches of 5: three bounded statements.
    assert_batched(ctx.captured_queries, "audits_linkedge", at_least=3)
    for table in BIG_TABLES:
        assert_batched(ctx.captured_queries, table)


def test_deleting_a_validation_removes_its_verdicts_in_batches(owner_client, owner, small_batches):
    """A validation of 100,000 issues holds as many verdict copies (RecheckedIssue): batched like the issues."""
    source = make_finished_audit(owner)
    doomed, kept = (make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=source, baseline=source)
                    for _ in range(2))
    for check in (doomed, kept):
        RecheckedIssue.objects.bulk_create(
            RecheckedIssue(audit=check, result="fixed", key=f"k{n}", url_hash=f"h{n}", url=f"{SITE}/p/{n}",
                           code="title_missing", severity="warning", message="Title missing") for n in range(12))
    with CaptureQueriesContext(connection) as ctx:
        assert owner_client.post(reverse("audit-delete", args=[doomed.pk])).status_code == 302
    assert not Audit.objects.filter(pk=doomed.pk).exists()
    assert not RecheckedIssue.objects.filter(audit_id=doomed.pk).exists()
    assert RecheckedIssue.objects.filter(audit=kept).count() == 12
    assert Audit.objects.filter(pk=source.pk).exists()
    # 12 verdicts in batches of 5: three bounded statements.
    assert_batched(ctx.captured_queries, "audits_recheckedissue", at_least=3)


def test_deleting_a_running_audit_cancels_it_first(owner_client, owner):
    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    seen = []
    original = Audit.cancel

    def cancel(self, *args, **kwargs):
        seen.append(LinkEdge.objects.filter(audit=self).exists())
        return original(self, *args, **kwargs)

    Audit.cancel = cancel
    try:
        owner_client.post(reverse("audit-delete", args=[running.pk]))
    finally:
        Audit.cancel = original
    # Cancelled before its rows went, so its workers stop writing first.
    assert seen == [True]
    assert not Audit.objects.filter(pk=running.pk).exists()


def test_deleting_a_site_purges_every_audit_in_batches(owner_client, owner, small_batches):
    first = _fill(make_finished_audit(owner))
    second = _fill(make_finished_audit(owner))
    site = first.site
    assert second.site_id == site.pk
    with CaptureQueriesContext(connection) as ctx:
        owner_client.post(reverse("site-delete", args=[site.pk]))
    assert not Site.objects.filter(pk=site.pk).exists()
    assert not Audit.objects.filter(pk__in=[first.pk, second.pk]).exists()
    assert not LinkEdge.objects.exists() and not Inlink.objects.exists()
    for table in BIG_TABLES:
        assert_batched(ctx.captured_queries, table, at_least=2)


@pytest.fixture
def enqueued(monkeypatch):
    """The real enqueue, into django-q2's queue: what a request leaves to a worker stays there (the
    dashboard's tests run each deletion at once, tests/dashboard/conftest.py)."""
    monkeypatch.setattr(purge, "enqueue", enqueue)


PURGES = {"audit": tasks.purge_audit, "site": tasks.purge_site}


@pytest.mark.parametrize("model", ["audit", "site"])
def test_the_admin_delete_page_counts_instead_of_listing_every_row(superuser_client, owner, model):
    audit = _fill(make_finished_audit(owner))
    obj = audit if model == "audit" else audit.site
    with CaptureQueriesContext(connection) as ctx:
        response = superuser_client.get(reverse(f"admin:audits_{model}_delete", args=[obj.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert "Link edge" not in body and "Are you sure" in body
    assert not [q for q in ctx.captured_queries if "audits_linkedge" in q["sql"] or "audits_issue" in q["sql"]]


@pytest.mark.parametrize("model", ["audit", "site"])
def test_the_admin_delete_marks_it_deleting_leaves_the_lists_and_a_worker_deletes_the_rows_in_batches(
        superuser_client, owner, model, enqueued, small_batches, django_capture_on_commit_callbacks):
    audit = _fill(make_finished_audit(owner))
    obj = audit if model == "audit" else audit.site
    with CaptureQueriesContext(connection) as ctx, django_capture_on_commit_callbacks(execute=True):
        response = superuser_client.post(reverse(f"admin:audits_{model}_delete", args=[obj.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not _deletes(ctx.captured_queries, "audits_linkedge")
    assert type(obj).objects.get(pk=obj.pk).deleting and LinkEdge.objects.filter(audit=audit).exists()
    assert f"{model}-{obj.pk}-purge" in queued_task_names()
    # A site's audits leave with it.
    for shown in ("audit",) if model == "audit" else ("audit", "site"):
        changelist = superuser_client.get(reverse(f"admin:audits_{shown}_changelist")).context["cl"]
        assert not changelist.result_list, shown
    # Its change page answers as for one already gone: the admin's redirect home.
    assert superuser_client.get(reverse(f"admin:audits_{model}_change", args=[obj.pk])).status_code == 302

    with CaptureQueriesContext(connection) as ctx:
        PURGES[model](obj.pk)
    assert not Audit.objects.filter(pk=audit.pk).exists() and not LinkEdge.objects.exists()
    assert_batched(ctx.captured_queries, "audits_linkedge", at_least=3)


@pytest.mark.parametrize("model", ["audit", "site"])
def test_the_admin_lists_of_pages_issues_and_notifications_leave_out_those_of_one_being_deleted(
        superuser_client, owner, model):
    doomed = make_finished_audit(owner)
    kept = make_finished_audit(owner, start_url="https://other.example/")
    assert kept.site_id != doomed.site_id
    for audit in (doomed, kept):
        Notification.objects.create(audit=audit, event="failed", channel="email")
    if model == "audit":
        Audit.objects.filter(pk=doomed.pk).update(deleting=True)
    else:
        Site.objects.filter(pk=doomed.site_id).update(deleting=True)
    for rows in (Page, Issue, Notification):
        name = rows._meta.model_name
        shown = superuser_client.get(reverse(f"admin:audits_{name}_changelist")).context["cl"].result_list
        assert shown and {row.audit_id for row in shown} == {kept.pk}, name
        # A row's change page answers as its audit's does: as for one already gone, the admin's redirect home.
        change = reverse(f"admin:audits_{name}_change", args=[rows.objects.filter(audit=doomed).first().pk])
        assert superuser_client.get(change).status_code == 302, name
        change = reverse(f"admin:audits_{name}_change", args=[rows.objects.filter(audit=kept).first().pk])
        assert superuser_client.get(change).status_code == 200, name


def test_the_admin_delete_action_marks_the_selected_audits_and_a_worker_deletes_their_rows_in_batches(
        superuser_client, owner, enqueued, small_batches, django_capture_on_commit_callbacks):
    audits = [_fill(make_finished_audit(owner)) for _ in range(2)]
    url = reverse("admin:audits_audit_changelist")
    selected = {"action": "delete_selected", "_selected_action": [a.pk for a in audits]}
    confirm = superuser_client.post(url, selected)
    assert confirm.status_code == 200 and "Link edge" not in confirm.content.decode()
    with CaptureQueriesContext(connection) as ctx, django_capture_on_commit_callbacks(execute=True):
        assert superuser_client.post(url, {**selected, "post": "yes"}).status_code == 302
    assert not _deletes(ctx.captured_queries, "audits_linkedge")
    assert Audit.objects.filter(deleting=True).count() == 2
    assert {f"audit-{a.pk}-purge" for a in audits} <= queued_task_names()
    assert not superuser_client.get(url).context["cl"].result_list

    with CaptureQueriesContext(connection) as ctx:
        for audit in audits:
            tasks.purge_audit(audit.pk)
    assert not Audit.objects.filter(pk__in=[a.pk for a in audits]).exists()
    assert not LinkEdge.objects.exists()
    assert_batched(ctx.captured_queries, "audits_linkedge", at_least=2 * 3)


@pytest.mark.parametrize("way", ["delete page", "delete action"])
def test_an_audit_a_delta_starts_reusing_as_the_admin_deletes_it_is_refused_with_a_message(
        superuser_client, owner, way, enqueued, monkeypatch, django_capture_on_commit_callbacks):
    audit = make_finished_audit(owner)
    delta = make_finished_audit(owner)
    Audit.objects.filter(pk=delta.pk).update(source=audit, status=Audit.Status.RUNNING)
    # The delta started after the admin's check (delete_protected) found no reuser.
    monkeypatch.setattr(admin_module, "in_use", lambda audits: [])
    if way == "delete page":
        url, data = reverse("admin:audits_audit_delete", args=[audit.pk]), {"post": "yes"}
    else:
        url = reverse("admin:audits_audit_changelist")
        data = {"action": "delete_selected", "_selected_action": [audit.pk], "post": "yes"}
    with django_capture_on_commit_callbacks(execute=True):
        response = superuser_client.post(url, data, follow=True)
    assert response.status_code == 200
    assert f"while audit {delta.pk}, which reuses its results, is running" in response.content.decode()
    assert not Audit.objects.get(pk=audit.pk).deleting
    assert f"audit-{audit.pk}-purge" not in queued_task_names()


def _said(response) -> list[tuple[str, str]]:
    return [(message.level_tag, str(message)) for message in response.context["messages"]]


@pytest.mark.parametrize("model", ["audit", "site"])
def test_the_admin_delete_page_says_it_queued_the_object_rather_than_deleted_it(superuser_client, owner, model,
                                                                               enqueued):
    audit = make_finished_audit(owner)
    obj = audit if model == "audit" else audit.site
    response = superuser_client.post(reverse(f"admin:audits_{model}_delete", args=[obj.pk]), {"post": "yes"},
                                     follow=True)
    assert _said(response) == [("success", f"The {model} “{obj}” is queued for deletion in the background.")]
    # Back to the list it was deleted from, which the audit admin only shows (no change permission there).
    assert response.redirect_chain[0][0] == reverse(f"admin:audits_{model}_changelist")


@pytest.mark.parametrize("model", ["audit", "site"])
def test_the_admin_delete_action_says_it_queued_them_rather_than_deleted_them(superuser_client, owner, model,
                                                                              enqueued):
    audits = [make_finished_audit(owner, start_url=url) for url in (f"{SITE}/", "https://other.example/")]
    objs = audits if model == "audit" else [audit.site for audit in audits]
    data = {"action": "delete_selected", "_selected_action": [obj.pk for obj in objs], "post": "yes"}
    response = superuser_client.post(reverse(f"admin:audits_{model}_changelist"), data, follow=True)
    assert _said(response) == [("success", f"Queued 2 {model}s for deletion in the background.")]
    assert type(objs[0]).objects.filter(deleting=True).count() == 2


def test_the_admin_delete_action_counts_only_those_it_queued_and_says_which_it_refused_and_why(
        superuser_client, owner, enqueued, monkeypatch, django_capture_on_commit_callbacks):
    reused, free = make_finished_audit(owner), make_finished_audit(owner)
    delta = make_finished_audit(owner)
    Audit.objects.filter(pk=delta.pk).update(source=reused, status=Audit.Status.RUNNING)
    # The delta started after the admin's check (delete_protected) found no reuser.
    monkeypatch.setattr(admin_module, "in_use", lambda audits: [])
    data = {"action": "delete_selected", "_selected_action": [reused.pk, free.pk], "post": "yes"}
    with django_capture_on_commit_callbacks(execute=True):
        response = superuser_client.post(reverse("admin:audits_audit_changelist"), data, follow=True)
    assert _said(response) == [
        ("success", "Queued 1 audit for deletion in the background."),
        ("error", f"Audit {reused.pk} cannot be deleted while audit {delta.pk}, which reuses its results, is "
                  f"running: wait for it to end or cancel it first."),
    ]
    assert list(Audit.objects.filter(deleting=True)) == [free]
    assert f"audit-{free.pk}-purge" in queued_task_names() and f"audit-{reused.pk}-purge" not in queued_task_names()
    # Its history says deleted only of the one that goes.
    assert list(LogEntry.objects.filter(action_flag=DELETION).values_list("object_id", flat=True)) == [str(free.pk)]


def _watch_batches(monkeypatch, before):
    """Call ``before(sql)`` ahead of each batch statement of the purge."""
    real = purge.delete_batches

    def watched(sql, audit_id):
        before(sql)
        return real(sql, audit_id)

    monkeypatch.setattr(purge, "delete_batches", watched)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("model", ["audit", "site"])
def test_the_purge_the_admin_enqueues_commits_each_batch_on_its_own(superuser_client, owner, monkeypatch, model,
                                                                     enqueued):
    """A purge inside a transaction would hold SQLite's lock to its end: the worker's commits each batch."""
    audit = _fill(make_finished_audit(owner))
    outer = []
    _watch_batches(monkeypatch, lambda sql: outer.append(connection.in_atomic_block))
    obj = audit if model == "audit" else audit.site
    response = superuser_client.post(reverse(f"admin:audits_{model}_delete", args=[obj.pk]), {"post": "yes"})
    assert response.status_code == 302 and not outer
    PURGES[model](obj.pk)
    assert outer and not any(outer)
    assert not Audit.objects.filter(pk=audit.pk).exists() and not LinkEdge.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_page_and_issue_a_cancelled_crawl_writes_during_the_purge_go_too(owner, monkeypatch):
    audit = _fill(make_finished_audit(owner, status=Audit.Status.RUNNING))
    late = []

    def last_sub_batch(sql):
        if '"audits_page"' in sql and not late:
            page = make_page(audit, f"{SITE}/late")
            late.append(make_issue(audit, "title_missing", page.url, page=page))

    _watch_batches(monkeypatch, last_sub_batch)
    purge.purge_audit(audit)
    assert late and not Audit.objects.filter(pk=audit.pk).exists()
    assert set(_rows(audit.pk).values()) == {0}


def test_deleting_a_site_cancels_its_running_audit_before_deleting_the_others(owner_client, owner):
    older = _fill(make_finished_audit(owner))
    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    seen = []
    real = purge.delete_batches

    def first(sql, audit_id):
        if not seen:
            seen.append(Audit.objects.get(pk=running.pk).status)
        return real(sql, audit_id)

    purge.delete_batches = first
    try:
        owner_client.post(reverse("site-delete", args=[older.site_id]))
    finally:
        purge.delete_batches = real
    assert seen == [Audit.Status.CANCELLED]
    assert not Audit.objects.filter(pk__in=[older.pk, running.pk]).exists()


def test_a_purged_audit_is_not_handed_to_the_link_index_build(owner, monkeypatch):
    audit = _fill(make_finished_audit(owner, status=Audit.Status.RUNNING))
    picked = []
    _watch_batches(monkeypatch, lambda sql: picked.append(ended_unindexed().filter(pk=audit.pk).exists()))
    purge.purge_audit(audit)
    assert picked and not any(picked)


def _reused(owner):
    source = _fill(make_finished_audit(owner))
    return source, make_finished_audit(owner, status=Audit.Status.RUNNING, mode=Audit.Mode.DELTA, source=source)


def test_an_audit_a_running_delta_reuses_is_not_deleted_and_says_why(owner_client, owner):
    source, delta = _reused(owner)
    response = owner_client.post(reverse("audit-delete", args=[source.pk]), follow=True)
    assert f"while audit {delta.pk}, which reuses its results, is running" in response.content.decode()
    assert Audit.objects.filter(pk=source.pk).exists() and source.links.count() > 12


def test_the_admin_protects_an_audit_a_running_delta_reuses(superuser_client, owner,
                                                             django_capture_on_commit_callbacks):
    source, delta = _reused(owner)
    page = superuser_client.get(reverse("admin:audits_audit_delete", args=[source.pk])).content.decode()
    assert f"running audit {delta.pk} reuses its results" in page
    with django_capture_on_commit_callbacks(execute=True):
        superuser_client.post(reverse("admin:audits_audit_delete", args=[source.pk]), {"post": "yes"})
    assert Audit.objects.filter(pk=source.pk).exists() and source.links.count() > 12


def test_the_admin_delete_of_a_site_needs_the_delete_permission_on_its_audits_too(client, django_user_model, owner):
    audit = _fill(make_finished_audit(owner))
    staff = django_user_model.objects.create_user("siteonly", password="siteonly-pass-1", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(
        content_type__app_label="audits", codename__in=["view_site", "delete_site"]))
    client.force_login(staff)
    response = client.post(reverse("admin:audits_site_delete", args=[audit.site_id]), {"post": "yes"})
    assert response.status_code == 403
    assert Site.objects.filter(pk=audit.site_id).exists() and Audit.objects.filter(pk=audit.pk).exists()


def test_nothing_starts_from_an_audit_while_its_rows_are_being_deleted(owner, monkeypatch):
    """Between its first batch and its last, a delta or validation would reuse half its rows."""
    source = _fill(make_finished_audit(owner))
    earlier_delta = make_finished_audit(owner, mode=Audit.Mode.DELTA, source=source)  # ended: no bar to deleting
    tried = []

    def midway(sql):
        if '"audits_linkedge"' in sql and not tried:
            for mode in (Audit.Mode.DELTA, Audit.Mode.VALIDATE):
                with pytest.raises(SourceGone, match="being deleted"):
                    follow_up(Audit.objects.get(pk=source.pk), mode)
                tried.append(mode)
            with pytest.raises(SourceGone):
                make_follow_up(make_finished_audit(owner, status=Audit.Status.QUEUED), source, Audit.Mode.DELTA)
            tried.append(source_of(earlier_delta))

    _watch_batches(monkeypatch, midway)
    purge.purge_audit(source)
    assert tried == [Audit.Mode.DELTA, Audit.Mode.VALIDATE, None]
    assert not Audit.objects.filter(pk=source.pk).exists()


def _delta_of_a_source_being_deleted(owner) -> Audit:
    """A purge stopped midway (a worker restart) leaves its audit marked deleting until deleted again."""
    source = make_finished_audit(owner)
    delta = make_finished_audit(owner, mode=Audit.Mode.DELTA, source=source)
    Audit.objects.filter(pk=source.pk).update(deleting=True)
    return delta


def test_re_running_a_delta_whose_source_is_being_deleted_says_why_instead_of_failing(owner_client, owner):
    delta = _delta_of_a_source_being_deleted(owner)
    response = owner_client.post(reverse("audit-rerun", args=[delta.pk]), follow=True)
    assert response.status_code == 200 and "being deleted" in response.content.decode()
    assert Audit.objects.count() == 2


def test_the_admins_re_run_of_a_delta_whose_source_is_being_deleted_says_why(superuser_client, owner):
    delta = _delta_of_a_source_being_deleted(owner)
    response = superuser_client.post(reverse("admin:audits_audit_changelist"),
                                     {"action": "rerun_audits", "_selected_action": [delta.pk]}, follow=True)
    assert response.status_code == 200 and f"Audit {delta.pk}:" in response.content.decode()
    assert Audit.objects.count() == 2

"""Edges and issues go with their audit and page, and finalize stops once its audit is gone."""


import pytest
from django.urls import reverse

from audits import finalize, tasks
from audits.finalize import link_targets
from audits.models import Audit, Issue, LinkEdge
from audits.watchdog import queued_task_names
from tests.factories import SITE, make_audit, make_issue, make_link, make_page

pytestmark = pytest.mark.django_db


def test_deleting_an_audit_still_deletes_its_edges_and_issues_and_no_one_elses(owner):
    audit, other = make_audit(owner), make_audit(owner)
    for a in (audit, other):
        page = make_page(a, f"{SITE}/gone", status_code=404)
        make_link(a, f"{SITE}/", f"{SITE}/gone")
        make_issue(a, "http_4xx", f"{SITE}/gone", page=page)
    audit.delete()
    assert not LinkEdge.objects.filter(audit_id=audit.pk).exists()
    assert not Issue.objects.filter(audit_id=audit.pk).exists()
    assert LinkEdge.objects.filter(audit=other).count() == 1 and Issue.objects.filter(audit=other).count() == 1


def test_deleting_a_page_still_deletes_its_issues(owner):
    audit = make_audit(owner)
    page, kept = make_page(audit, f"{SITE}/gone", status_code=404), make_page(audit, f"{SITE}/")
    make_issue(audit, "http_4xx", f"{SITE}/gone", page=page)
    make_issue(audit, "title_missing", f"{SITE}/", page=kept)
    page.delete()
    assert list(Issue.objects.filter(audit=audit).values_list("page_id", flat=True)) == [kept.pk]


def test_finalize_stops_inserting_once_its_audit_is_deleted_between_checks(owner, monkeypatch):
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    make_page(audit, f"{SITE}/gone", status_code=404)
    make_link(audit, f"{SITE}/", f"{SITE}/gone")
    ran = []

    def delete_the_audit(audit_id):
        ran.append("delete")
        Audit.objects.get(pk=audit_id).delete()
        return iter(())

    def later_check(audit_id):
        ran.append("later")
        return link_targets(audit_id)

    monkeypatch.setattr(finalize, "CHECKS", [delete_the_audit, later_check])
    assert finalize.run_finalize(audit.pk) is False
    assert ran == ["delete"]
    assert not Issue.objects.filter(audit_id=audit.pk).exists()
    assert not LinkEdge.objects.filter(audit_id=audit.pk).exists()


def test_deleting_audits_from_the_admin_list_deletes_their_edges_and_issues(owner, admin_client,
                                                                             django_capture_on_commit_callbacks):
    audits = [make_audit(owner) for _ in range(2)]
    for a in audits:
        page = make_page(a, f"{SITE}/gone", status_code=404)
        make_link(a, f"{SITE}/", f"{SITE}/gone")
        make_issue(a, "http_4xx", f"{SITE}/gone", page=page)
    # The admin marks them deleting and enqueues their purge, as the dashboard does (audits.purge.delete_soon).
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("admin:audits_audit_changelist"), {
            "action": "delete_selected", "_selected_action": [a.pk for a in audits], "post": "yes"})
    assert response.status_code == 302
    assert {f"audit-{a.pk}-purge" for a in audits} <= queued_task_names()
    for a in audits:
        tasks.purge_audit(a.pk)
    assert not Audit.objects.exists() and not LinkEdge.objects.exists() and not Issue.objects.exists()

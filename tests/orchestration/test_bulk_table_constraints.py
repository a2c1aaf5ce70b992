"""Edges and issues carry no database foreign keys (LinkEdge.audit explains why),
yet go with their audit and page as before."""

import threading

import pytest
from django.db import OperationalError, connection, transaction
from django.urls import reverse

from audits import finalize
from audits.finalize import link_targets
from audits.models import Audit, Issue, LinkEdge, Page
from tests.factories import SITE, make_audit, make_issue, make_link, make_page

pytestmark = pytest.mark.django_db


def foreign_keys(table: str) -> dict:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {tuple(c["columns"]): c["foreign_key"] for c in constraints.values() if c["foreign_key"]}


def test_the_bulk_written_tables_have_no_foreign_keys_to_check_per_row():
    assert foreign_keys(LinkEdge._meta.db_table) == {}
    assert foreign_keys(Issue._meta.db_table) == {}
    # The tables written once per URL keep theirs.
    assert ("audit_id",) in foreign_keys(Page._meta.db_table)


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


def test_deleting_audits_from_the_admin_list_deletes_their_edges_and_issues(owner, admin_client):
    audits = [make_audit(owner) for _ in range(2)]
    for a in audits:
        page = make_page(a, f"{SITE}/gone", status_code=404)
        make_link(a, f"{SITE}/", f"{SITE}/gone")
        make_issue(a, "http_4xx", f"{SITE}/gone", page=page)
    response = admin_client.post(reverse("admin:audits_audit_changelist"), {
        "action": "delete_selected", "_selected_action": [a.pk for a in audits], "post": "yes"})
    assert response.status_code == 302
    assert not Audit.objects.exists() and not LinkEdge.objects.exists() and not Issue.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks between two sessions: PostgreSQL's")
def test_a_finalize_check_holds_off_a_delete_of_its_audit_but_not_a_cancel(owner):
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    held, release = threading.Event(), threading.Event()

    def finalize_check():  # another session, as a worker's would be
        try:
            with transaction.atomic():
                assert finalize._hold(audit.pk)
                held.set()
                release.wait(10)
        finally:
            connection.close()

    worker = threading.Thread(target=finalize_check)
    worker.start()
    assert held.wait(10)
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '2s'")
            assert Audit.objects.get(pk=audit.pk).cancel()  # a plain UPDATE goes through at once
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '300ms'")
            Audit.objects.get(pk=audit.pk).delete()  # waits for the check
    finally:
        release.set()
        worker.join()
    assert Audit.objects.get(pk=audit.pk).status == Audit.Status.CANCELLED

"""Deleting an audit or a site removes its rows a batch at a time, never in one statement a table.

An audit can hold millions of link edges: one cascading DELETE would hold
SQLite's write lock for minutes, or run into PostgreSQL's statement timeout.
"""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audits import purge
from audits.models import Audit, Inlink, Issue, LinkEdge, Page, Site
from tests.factories import SITE, make_finished_audit, make_link

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

    response = superuser_client.post(reverse(f"admin:audits_{model}_delete", args=[obj.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Audit.objects.filter(pk=audit.pk).exists() and not LinkEdge.objects.exists()


def test_the_admin_delete_action_purges_the_selected_audits(superuser_client, owner, small_batches):
    audits = [_fill(make_finished_audit(owner)) for _ in range(2)]
    url = reverse("admin:audits_audit_changelist")
    selected = {"action": "delete_selected", "_selected_action": [a.pk for a in audits]}
    confirm = superuser_client.post(url, selected)
    assert confirm.status_code == 200 and "Link edge" not in confirm.content.decode()
    with CaptureQueriesContext(connection) as ctx:
        superuser_client.post(url, {**selected, "post": "yes"})
    assert not Audit.objects.filter(pk__in=[a.pk for a in audits]).exists()
    assert not LinkEdge.objects.exists()
    assert_batched(ctx.captured_queries, "audits_linkedge", at_least=2 * 3)

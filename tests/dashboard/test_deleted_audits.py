"""Audits that outlive the audit they were compared with or started from (baseline and source are SET_NULL)."""

import pytest
from django.urls import reverse

from audits.models import Audit
from tests.factories import make_finished_audit

pytestmark = pytest.mark.django_db

CHANGES = {"issues": {"new": {"critical": 1}}, "pages": {"added": 1}}


@pytest.fixture
def orphan(owner_client, owner):
    """An audit with recorded changes whose baseline the owner then deleted."""
    baseline = make_finished_audit(owner)
    audit = make_finished_audit(owner)
    Audit.objects.filter(pk=audit.pk).update(baseline=baseline, change_counts=CHANGES)
    assert owner_client.post(reverse("audit-delete", args=[baseline.pk])).status_code == 302
    audit.refresh_from_db()
    assert audit.baseline_id is None and audit.change_counts == CHANGES
    return audit


@pytest.mark.parametrize("name", ["audit-detail", "audit-progress"])
def test_the_audit_page_keeps_its_changes_and_says_the_baseline_is_deleted(owner_client, orphan, name):
    response = owner_client.get(reverse(name, args=[orphan.pk]))
    body = response.content.decode()
    assert response.status_code in (200, 286)
    assert 'id="changes"' in body and 'id="baseline-deleted"' in body
    assert 'id="compare-previous"' not in body


@pytest.mark.parametrize("name, query", [("issue-list", "?change=fixed"), ("page-list", "?change=added"),
                                         ("site-detail", ""), ("site-list", ""), ("audit-list", "")])
def test_the_other_screens_of_an_audit_whose_baseline_is_deleted_still_open(owner_client, orphan, name, query):
    args = {"site-detail": [orphan.site_id], "site-list": [], "audit-list": []}.get(name, [orphan.pk])
    assert owner_client.get(reverse(name, args=args) + query).status_code == 200


@pytest.mark.parametrize("mode", [Audit.Mode.DELTA, Audit.Mode.VALIDATE])
def test_a_follow_up_whose_source_is_deleted_says_so(owner_client, owner, mode):
    source = make_finished_audit(owner)
    audit = make_finished_audit(owner)
    Audit.objects.filter(pk=audit.pk).update(mode=mode, source=source)
    owner_client.post(reverse("audit-delete", args=[source.pk]))
    response = owner_client.get(reverse("audit-detail", args=[audit.pk]))
    assert response.status_code == 200 and "(deleted)" in response.content.decode()
    assert owner_client.get(reverse("audit-progress", args=[audit.pk])).status_code == 286

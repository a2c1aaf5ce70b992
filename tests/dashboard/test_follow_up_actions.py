"""Re-check issues (a validation) and re-crawl changes (a delta crawl) from a completed audit's page."""

import pytest
from django.test import Client
from django.urls import reverse

from audits.models import Audit, Issue
from tests.factories import make_finished_audit

pytestmark = pytest.mark.django_db


def test_re_check_issues_starts_a_validation_of_the_audit(owner_client, owner):
    audit = make_finished_audit(owner, max_pages=42)
    response = owner_client.post(reverse("audit-validate", args=[audit.pk]))
    fresh = Audit.objects.exclude(pk=audit.pk).get()
    assert response["Location"] == fresh.get_absolute_url()
    assert (fresh.mode, fresh.source, fresh.baseline, fresh.status) == (
        Audit.Mode.VALIDATE, audit, audit, Audit.Status.QUEUED)
    # Its page budget is what it re-checks: the pages that carried issues, plus the start page.
    pages = set(Issue.objects.filter(audit=audit).exclude(page=None).values_list("page_id", flat=True))
    assert fresh.max_pages >= len(pages) and fresh.max_pages != 42
    body = owner_client.get(fresh.get_absolute_url()).content.decode()
    assert "re-checks the issues of audit" in body and 'id="source-link"' in body


def test_re_crawl_changes_starts_a_delta_crawl_with_the_same_limits(owner_client, owner):
    audit = make_finished_audit(owner, max_pages=42)
    owner_client.post(reverse("audit-delta", args=[audit.pk]))
    fresh = Audit.objects.exclude(pk=audit.pk).get()
    assert (fresh.mode, fresh.source, fresh.max_pages, fresh.baseline) == (Audit.Mode.DELTA, audit, 42, None)


def test_the_buttons_show_on_a_completed_full_audit_only(owner_client, owner):
    done = make_finished_audit(owner)
    body = owner_client.get(done.get_absolute_url()).content.decode()
    assert 'id="validate"' in body and 'id="delta"' in body
    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    assert 'id="validate"' not in owner_client.get(running.get_absolute_url()).content.decode()
    check = make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=done)
    assert 'id="validate"' not in owner_client.get(check.get_absolute_url()).content.decode()


@pytest.mark.parametrize("name", ["audit-validate", "audit-delta"])
def test_a_running_audit_or_a_validation_cannot_be_followed_up(owner_client, owner, name):
    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    check = make_finished_audit(owner, mode=Audit.Mode.VALIDATE)
    for audit in (running, check):
        response = owner_client.post(reverse(name, args=[audit.pk]), follow=True)
        assert "Only a completed full or delta audit" in response.content.decode()
    assert Audit.objects.count() == 2


@pytest.mark.parametrize("name", ["audit-validate", "audit-delta"])
def test_follow_ups_answer_post_only_and_strangers_get_404(owner_client, owner, django_user_model, name):
    audit = make_finished_audit(owner)
    assert owner_client.get(reverse(name, args=[audit.pk])).status_code == 405
    stranger = django_user_model.objects.create_user("stranger", password="pw-stranger-123")
    client = Client()
    client.force_login(stranger)
    assert client.post(reverse(name, args=[audit.pk])).status_code == 404
    assert Audit.objects.count() == 1


def test_re_running_a_validation_re_checks_the_same_audit(owner_client, owner):
    done = make_finished_audit(owner, max_pages=42)
    check = make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=done, baseline=done, max_pages=3)
    owner_client.post(reverse("audit-rerun", args=[check.pk]))
    fresh = Audit.objects.latest("pk")
    assert (fresh.mode, fresh.source, fresh.baseline) == (Audit.Mode.VALIDATE, done, done)


def test_a_validation_is_never_the_previous_audit_a_full_one_is_compared_with(owner):
    done = make_finished_audit(owner)
    make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=done)
    later = make_finished_audit(owner)
    assert later.previous_completed() == done

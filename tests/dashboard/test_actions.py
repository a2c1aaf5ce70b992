"""Cancel, resume, re-run and delete: POST only, CSRF-checked, through the services."""

import pytest
from django.test import Client
from django.urls import reverse
from django_q.models import OrmQ

from audits.models import Audit, Issue, Page
from tests.factories import make_finished_audit

pytestmark = pytest.mark.django_db


def test_cancel_stops_a_running_audit_and_keeps_its_results(owner_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    response = owner_client.post(reverse("audit-cancel", args=[audit.pk]))
    assert response.status_code == 302 and response["Location"] == audit.get_absolute_url()
    audit.refresh_from_db()
    assert audit.status == Audit.Status.CANCELLED and audit.error_code == "cancelled"
    assert Page.objects.filter(audit=audit).count() == 7


def test_cancel_records_who_cancelled(owner_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    owner_client.post(reverse("audit-cancel", args=[audit.pk]))
    audit.refresh_from_db()
    assert audit.error_detail == "Cancelled by owner."


def test_the_cancel_button_asks_for_confirmation(owner_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    form = body.split(f'action="{reverse("audit-cancel", args=[audit.pk])}"')[1].split(">")[0]
    assert 'data-confirm="Cancel this audit?' in form
    assert "js/confirm.js" in body  # the listener that asks, for every data-confirm form


def test_cancel_on_an_ended_audit_changes_nothing(owner_client, owner):
    audit = make_finished_audit(owner)
    owner_client.post(reverse("audit-cancel", args=[audit.pk]))
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED


def test_resume_requeues_a_failed_audit(owner_client, owner, django_capture_on_commit_callbacks):
    audit = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled")
    with django_capture_on_commit_callbacks(execute=True):
        owner_client.post(reverse("audit-resume", args=[audit.pk]))
    audit.refresh_from_db()
    assert audit.status == Audit.Status.QUEUED and audit.error_code == ""
    assert OrmQ.objects.count() == 1


def test_rerun_starts_a_fresh_audit_with_the_same_settings(owner_client, owner):
    audit = make_finished_audit(owner, max_pages=42, exclude_patterns="/private/")
    response = owner_client.post(reverse("audit-rerun", args=[audit.pk]))
    fresh = Audit.objects.exclude(pk=audit.pk).get()
    assert response["Location"] == fresh.get_absolute_url()
    assert fresh.status == Audit.Status.QUEUED and fresh.max_pages == 42
    assert fresh.exclude_patterns == "/private/" and fresh.start_url == audit.start_url


def test_rerun_refuses_a_private_target_once_the_setting_is_off(owner_client, owner):
    audit = make_finished_audit(owner, allow_private=True, start_url="http://127.0.0.1:8000/")
    response = owner_client.post(reverse("audit-rerun", args=[audit.pk]), follow=True)
    assert Audit.objects.count() == 1
    body = response.content.decode()
    assert "targeted a private address, which is no longer allowed" in body
    assert 'id="rerun"' not in body  # and the page no longer offers it


def test_resume_refuses_a_private_target_once_the_setting_is_off(owner_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled", allow_private=True,
                                start_url="http://127.0.0.1:8000/")
    response = owner_client.post(reverse("audit-resume", args=[audit.pk]), follow=True)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.FAILED and OrmQ.objects.count() == 0
    body = response.content.decode()
    assert "targeted a private address, which is no longer allowed" in body
    assert 'id="resume"' not in body and 'id="rerun"' not in body


def test_a_private_target_may_resume_and_rerun_while_the_setting_is_on(owner_client, owner, allow_private):
    audit = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled", allow_private=True,
                                start_url="http://127.0.0.1:8000/")
    assert 'id="resume"' in owner_client.get(audit.get_absolute_url()).content.decode()
    owner_client.post(reverse("audit-rerun", args=[audit.pk]))
    rerun = Audit.objects.exclude(pk=audit.pk).get()
    assert rerun.allow_private is True
    rerun.cancel()  # one active audit a site: the resume below waits for it
    owner_client.post(reverse("audit-resume", args=[audit.pk]))
    audit.refresh_from_db()
    assert audit.status == Audit.Status.QUEUED


def test_rerun_respects_the_quota(owner_client, owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "MAX_RUNNING_AUDITS_PER_USER": 1}
    make_finished_audit(owner, status=Audit.Status.RUNNING)
    done = make_finished_audit(owner)
    response = owner_client.post(reverse("audit-rerun", args=[done.pk]), follow=True)
    assert Audit.objects.count() == 2
    assert "already have 1 audits queued or running" in response.content.decode()


def test_delete_removes_the_audit_and_everything_it_found(owner_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    response = owner_client.post(reverse("audit-delete", args=[audit.pk]))
    assert response["Location"] == reverse("audit-list")
    assert not Audit.objects.exists() and not Page.objects.exists() and not Issue.objects.exists()


def test_a_post_without_the_csrf_token_is_refused(owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(reverse("audit-cancel", args=[audit.pk])).status_code == 403
    assert client.post(reverse("audit-new"), {"start_url": "https://www.example.com/"}).status_code == 403
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING and Audit.objects.count() == 1


def test_an_htmx_post_with_the_csrf_header_is_accepted(owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    page = client.get(audit.get_absolute_url())
    token = page.cookies["csrftoken"].value
    # The page hands htmx the token for every request it makes.
    assert "X-CSRFToken" in page.content.decode()
    response = client.post(reverse("audit-cancel", args=[audit.pk]), HTTP_X_CSRFTOKEN=token,
                           HTTP_HX_REQUEST="true")
    assert response.status_code == 302
    audit.refresh_from_db()
    assert audit.status == Audit.Status.CANCELLED

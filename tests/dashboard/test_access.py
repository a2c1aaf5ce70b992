"""Every audit-scoped URL is the owner's alone: strangers get 404, anonymous people the login page."""

import pytest
from django.urls import reverse

from audits.models import Audit
from tests.factories import make_finished_audit

pytestmark = pytest.mark.django_db

GET_URLS = ["audit-detail", "audit-progress", "issue-list", "page-list", "page-detail",
            "export-pages", "export-issues", "export-links"]
POST_URLS = ["audit-cancel", "audit-resume", "audit-rerun", "audit-delete"]


def url_for(name, audit):
    if name == "page-detail":
        return reverse(name, args=[audit.pk, audit.pages.first().pk])
    return reverse(name, args=[audit.pk])


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("name", GET_URLS + POST_URLS)
def test_it_answers_404_to_a_stranger(stranger_client, owner, name, method):
    audit = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled")
    response = getattr(stranger_client, method)(url_for(name, audit), HTTP_HX_REQUEST="true")
    assert response.status_code == 404
    # Nothing about the audit leaks and nothing changed.
    assert b"shop.example" not in response.content
    audit.refresh_from_db()
    assert audit.status == Audit.Status.FAILED
    assert Audit.objects.count() == 1


@pytest.mark.parametrize("name", GET_URLS)
def test_it_serves_every_screen_to_the_owner(owner_client, owner, name):
    audit = make_finished_audit(owner)
    response = owner_client.get(url_for(name, audit))
    assert response.status_code in (200, 286)


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("name", GET_URLS + POST_URLS + ["audit-list", "audit-new"])
def test_it_sends_anonymous_people_to_the_login_page(client, owner, name, htmx):
    audit = make_finished_audit(owner)
    url = reverse(name) if name in ("audit-list", "audit-new") else url_for(name, audit)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.post(url, **headers) if name in POST_URLS else client.get(url, **headers)
    if htmx:
        # htmx would swap the login page into the page it came from: it reloads that page
        # instead, which a plain request then sends to the login page.
        assert response.status_code == 204 and response["HX-Refresh"] == "true" and response.content == b""
    else:
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED and Audit.objects.count() == 1


@pytest.mark.parametrize("name", POST_URLS)
def test_it_refuses_actions_on_get(owner_client, owner, name):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    response = owner_client.get(url_for(name, audit))
    assert response.status_code == 405
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING
    assert Audit.objects.count() == 1


def test_a_missing_page_of_the_owners_audit_is_404(owner_client, owner):
    audit = make_finished_audit(owner)
    other = make_finished_audit(owner)
    # A page id from another audit (even the owner's own) is not part of this audit.
    page = other.pages.first()
    assert owner_client.get(reverse("page-detail", args=[audit.pk, page.pk])).status_code == 404


@pytest.mark.parametrize("path", ["/accounts/password_reset/", "/accounts/reset/MQ/set-password/",
                                  "/accounts/password_reset/done/"])
def test_no_page_open_to_anyone_resets_a_password_or_sends_mail(client, path, mailoutbox):
    assert client.get(path).status_code == 404
    assert client.post(path, {"email": "owner@example.com"}).status_code == 404
    assert mailoutbox == []


def test_a_person_signs_in_and_changes_their_own_password(client, owner):
    owner.set_password("old-pass-123456")
    owner.save()
    assert client.post(reverse("login"), {"username": owner.username, "password": "old-pass-123456"}).status_code == 302
    response = client.post(reverse("password_change"), {
        "old_password": "old-pass-123456", "new_password1": "A-new-pass-98765", "new_password2": "A-new-pass-98765"})
    assert response.status_code == 302
    owner.refresh_from_db()
    assert owner.check_password("A-new-pass-98765")

import pytest
from django.urls import reverse

from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def test_anonymous_people_are_sent_to_the_login_page(client):
    response = client.get(reverse("audit-list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_login_page_is_reachable_without_logging_in(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b'name="password"' in response.content


def test_a_person_logs_in_and_sees_an_empty_audit_list(client, owner):
    response = client.post(reverse("login"), {"username": "owner", "password": "owner-pass-123"}, follow=True)
    assert response.status_code == 200
    assert b"No audits yet." in response.content


def test_the_list_shows_only_the_persons_own_audits(owner_client, owner, stranger):
    make_audit(owner, start_url="https://mine.example/")
    make_audit(stranger, start_url="https://theirs.example/")
    body = owner_client.get(reverse("audit-list")).content.decode()
    assert "mine.example" in body and "theirs.example" not in body


def test_audit_for_user_answers_404_for_someone_elses_audit(rf, owner, stranger):
    from django.http import Http404

    from audits.access import audit_for_user

    audit = make_audit(stranger)
    request = rf.get("/")
    request.user = owner
    with pytest.raises(Http404):
        audit_for_user(request, audit.pk)
    request.user = stranger
    assert audit_for_user(request, audit.pk) == audit


def test_the_admin_is_for_staff_only(owner_client):
    response = owner_client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_staff_see_every_audit_in_the_admin(client, django_user_model, owner, stranger):
    make_audit(owner, start_url="https://mine.example/")
    make_audit(stranger, start_url="https://theirs.example/")
    admin = django_user_model.objects.create_superuser("boss", password="boss-pass-123")
    client.force_login(admin)
    body = client.get("/admin/audits/audit/").content.decode()
    assert "mine.example" in body and "theirs.example" in body


def test_someone_elses_audit_page_is_a_404(owner_client, stranger):
    audit = make_audit(stranger)
    assert owner_client.get(reverse("audit-detail", args=[audit.pk])).status_code == 404


def test_the_owner_sees_their_audit_page(owner_client, owner):
    audit = make_audit(owner, start_url="https://mine.example/")
    response = owner_client.get(reverse("audit-detail", args=[audit.pk]))
    assert response.status_code == 200 and b"mine.example" in response.content

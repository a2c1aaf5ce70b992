"""`manage.py ensure_login` (run by `make run`): a login anyone can use, and no password from the environment in the logs."""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

pytestmark = pytest.mark.django_db

ENV_PASSWORD = "env-horse-battery-42"


def ensure_login() -> str:
    out = io.StringIO()
    call_command("ensure_login", stdout=out)
    return out.getvalue()


def logs_in(client, username: str, password: str) -> bool:
    """Whether the login page takes these (it redirects on success)."""
    return client.post(reverse("login"), {"username": username, "password": password}).status_code == 302


def test_a_password_from_the_environment_logs_in_and_is_never_printed(monkeypatch, client):
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "ops")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", ENV_PASSWORD)
    created, again = ensure_login(), ensure_login()
    assert ENV_PASSWORD not in created + again
    assert "Created login: ops (password from DJANGO_SUPERUSER_PASSWORD)" in created
    assert logs_in(client, "ops", ENV_PASSWORD)


def test_an_empty_password_variable_gets_a_generated_password_printed_once(monkeypatch, client):
    """An empty variable is unset, as for an existing user: the login must not be said to come from it."""
    monkeypatch.delenv("DJANGO_SUPERUSER_USERNAME", raising=False)
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "")
    printed = ensure_login()
    assert "DJANGO_SUPERUSER_PASSWORD" not in printed and "shown only once" in printed
    password = printed.split("password: ", 1)[1].split()[0]
    assert logs_in(client, "admin", password)
    assert password not in ensure_login()

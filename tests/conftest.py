"""Fixtures shared by the whole suite: people, logged-in clients, subprocess helpers."""

import os
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user("stranger", password="stranger-pass-123")


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def subprocess_env(**extra) -> dict:
    """Environment for a manage.py subprocess that must use the test database.

    pytest-django has already switched the connection to the test database, so
    its settings name the database (or SQLite file) the child must open.
    """
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        url = "sqlite:///" + str(Path(db["NAME"]).resolve())
    else:
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        url = f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"))}
    env.update(
        DATABASE_URL=url,
        SECRET_KEY="test-only-secret-key-not-for-production-use-0123456789",
        DJANGO_SETTINGS_MODULE="config.settings",
        PYTHONUNBUFFERED="1",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


MANAGE = [sys.executable, str(ROOT / "manage.py")]

"""Dashboard test fixtures: a DNS stub (no test ever asks a real resolver) and settings helpers."""

import importlib
import socket

import pytest

import audits.forms
from audits import purge

# Names the stub resolver knows; everything else does not exist.
PUBLIC_IP = "93.184.215.14"
KNOWN_HOSTS = {
    "www.example.com": [PUBLIC_IP],
    "intranet.example.com": ["10.1.2.3"],
    "shop.example": [PUBLIC_IP],  # tests.factories.SITE
    "other.example": [PUBLIC_IP],
}


def stub_resolver(host, port):
    try:
        return list(KNOWN_HOSTS[host])
    except KeyError:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None


@pytest.fixture(autouse=True)
def no_real_dns(monkeypatch):
    monkeypatch.setattr(audits.forms, "resolver", stub_resolver)


@pytest.fixture(autouse=True)
def deletions_run_at_once(monkeypatch):
    """A worker takes each deletion as it is enqueued (audits.purge.delete_soon), so the screens' tests see it
    done; tests/orchestration/test_deleting_in_the_background.py shows what happens before a worker runs it."""
    def run(func, *args, name, queue=None):
        module, _, task = func.rpartition(".")
        getattr(importlib.import_module(module), task)(*args)

    monkeypatch.setattr(purge, "enqueue", run)


@pytest.fixture
def allow_private(settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True}


@pytest.fixture
def superuser_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss", password="boss-pass-123"))
    return client


@pytest.fixture
def stranger_client(client, stranger):
    client.force_login(stranger)
    return client

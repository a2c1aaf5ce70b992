"""Fixtures the alert tests share: an owner with an address to mail, loopback webhooks allowed, a webhook endpoint."""

import pytest

ALERTS_BASE_URL = "https://siteward.test"


@pytest.fixture
def alerts(settings):
    """Loopback webhooks allowed, a short webhook timeout, a known base URL."""
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "WEBHOOK_TIMEOUT": 2.0,
                         "BASE_URL": ALERTS_BASE_URL}
    return settings


@pytest.fixture
def hook(httpserver_ipv4):
    """pytest-httpserver bound to 127.0.0.1, answering POST /hook with 204."""
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("", status=204)
    return httpserver_ipv4


@pytest.fixture
def owner(django_user_model):
    """The suite's owner, with an address: alerts go to it by email."""
    return django_user_model.objects.create_user("owner", email="owner@example.com", password="owner-pass-123")

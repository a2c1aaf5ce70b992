"""Webhook alerts that meet a blip: retried when surely not taken, a capped number of times, never when maybe taken.

Every server is on 127.0.0.1; ALLOW_PRIVATE_TARGETS lets the webhook guard reach it.
"""

from __future__ import annotations

import socket

import pytest

from audits import notify as notify_module
from audits.notify import notify
from tests.audits.test_notify import CRITICAL_NEW, ended, rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def alerts(settings, monkeypatch):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "WEBHOOK_TIMEOUT": 2.0,
                         "BASE_URL": "https://siteward.test"}
    monkeypatch.setattr(notify_module, "RETRY_DELAYS", (0.05, 0.05))
    return settings



def test_a_webhook_answering_503_once_is_retried_and_delivered(alerts, owner, httpserver_ipv4):
    httpserver_ipv4.expect_oneshot_request("/hook", method="POST").respond_with_data("busy", status=503)
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("", status=204)
    audit = ended(owner, new=CRITICAL_NEW, webhook=httpserver_ipv4.url_for("/hook"))

    notify(audit.pk)

    assert rows(audit)["webhook"] == ("sent", "HTTP 204 (after 2 tries)")
    assert len(httpserver_ipv4.log) == 2
    first, second = (request.get_data() for request, _ in httpserver_ipv4.log)
    assert first == second  # the same alert, not a second one


def test_a_webhook_that_keeps_answering_503_is_tried_three_times_then_again_later(
        alerts, owner, httpserver_ipv4):
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("busy", status=503)
    audit = ended(owner, new=CRITICAL_NEW, webhook=httpserver_ipv4.url_for("/hook"))

    notify(audit.pk)

    state, detail = rows(audit)["webhook"]
    assert state == "retry" and detail.startswith("HTTP 503: busy (after 3 tries); tried again at ")
    assert len(httpserver_ipv4.log) == 3


@pytest.mark.parametrize("status", [400, 500])
def test_a_webhook_refusing_the_alert_is_not_retried(alerts, owner, httpserver_ipv4, status):
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("no", status=status)
    audit = ended(owner, new=CRITICAL_NEW, webhook=httpserver_ipv4.url_for("/hook"))

    notify(audit.pk)

    assert rows(audit)["webhook"] == ("failed", f"HTTP {status}: no")
    assert len(httpserver_ipv4.log) == 1


def test_a_webhook_with_nothing_listening_is_retried_up_to_the_cap(alerts, owner):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed again: nothing listens there
    audit = ended(owner, new=CRITICAL_NEW, webhook=f"http://127.0.0.1:{port}/hook")

    notify(audit.pk)

    state, detail = rows(audit)["webhook"]
    assert state == "retry" and detail.startswith("Could not connect") and "(after 3 tries); tried again" in detail

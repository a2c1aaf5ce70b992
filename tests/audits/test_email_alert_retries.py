"""E-mail alerts that meet a busy mail server: retried when surely not taken, a capped number of times, never after a refusal.

Sent through Django's SMTP backend to a mail server on 127.0.0.1 (``tests.smtp_stub``).
"""

from __future__ import annotations

import socket

import pytest

from audits import notify as notify_module
from audits.notify import notify
from tests.audits.test_notify import CRITICAL_NEW, ended, rows
from tests.smtp_stub import SMTPStub

pytestmark = pytest.mark.django_db



@pytest.fixture
def smtp(settings, monkeypatch):
    """Point Django's SMTP backend at a stub; returns a function that starts one with a script."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_TIMEOUT = "127.0.0.1", 5
    settings.SITEWARD = {**settings.SITEWARD, "BASE_URL": "https://siteward.test"}
    monkeypatch.setattr(notify_module, "RETRY_DELAYS", (0.05, 0.05))
    stubs = []

    def start(*script: str) -> SMTPStub:
        stub = SMTPStub(*script).__enter__()
        settings.EMAIL_PORT = stub.port
        stubs.append(stub)
        return stub

    yield start
    for stub in stubs:
        stub.__exit__(None, None, None)


@pytest.mark.parametrize("first", ["421", "450"])
def test_a_mail_server_that_says_try_again_later_once_is_tried_again_and_takes_the_alert(smtp, owner, first):
    server = smtp(first, "ok")
    audit = ended(owner, new=CRITICAL_NEW)

    notify(audit.pk)

    assert rows(audit)["email"] == ("sent", "owner@example.com (after 2 tries)")
    assert server.connections == 2 and len(server.messages) == 1
    assert "new critical issues" in server.messages[0]


def test_a_mail_server_that_stays_busy_is_tried_three_times_and_then_again_later(smtp, owner):
    server = smtp("421")
    audit = ended(owner, new=CRITICAL_NEW)

    notify(audit.pk)

    state, detail = rows(audit)["email"]
    assert state == "retry" and detail.startswith("SMTPConnectError") and "(after 3 tries); tried again at" in detail
    assert server.connections == 3 and server.messages == []


def test_a_recipient_the_mail_server_refuses_for_good_is_not_tried_again(smtp, owner):
    server = smtp("550", "ok")
    audit = ended(owner, new=CRITICAL_NEW)

    notify(audit.pk)

    state, detail = rows(audit)["email"]
    assert state == "failed" and "550" in detail and "tries" not in detail
    assert server.connections == 1


def test_no_mail_server_listening_is_tried_three_times(smtp, owner, settings):
    smtp("ok")
    with socket.socket() as unused:  # a port nothing listens on once it is closed
        unused.bind(("127.0.0.1", 0))
        settings.EMAIL_PORT = unused.getsockname()[1]
    audit = ended(owner, new=CRITICAL_NEW)

    notify(audit.pk)

    state, detail = rows(audit)["email"]
    assert state == "retry" and detail.startswith("ConnectionRefusedError") and "(after 3 tries); tried again" in detail

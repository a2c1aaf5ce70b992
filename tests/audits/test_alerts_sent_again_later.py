"""An alert the other end surely did not take (a receiver or mail server down for an hour) is sent again
later, a few rounds over hours, by the watchdog; one maybe taken, or refused for good, is never sent again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audits import notify as notify_module
from audits.models import Notification, Site
from audits.notify import LATER_DELAYS, notify
from audits.watchdog import queued_task_names, run_watchdog
from tests.audits.test_notify import CRITICAL_NEW, ended, rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def alerts(settings, monkeypatch):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "WEBHOOK_TIMEOUT": 2.0,
                         "BASE_URL": "https://siteward.test"}
    monkeypatch.setattr(notify_module, "RETRY_DELAYS", ())
    return settings



def come_due(audit) -> None:
    Notification.objects.filter(audit=audit, state=Notification.State.RETRY).update(
        retry_at=timezone.now() - timedelta(seconds=1))


def test_a_webhook_down_for_a_while_gets_the_alert_when_the_watchdog_sends_it_again(
        alerts, owner, httpserver_ipv4, mailoutbox, django_capture_on_commit_callbacks):
    httpserver_ipv4.expect_oneshot_request("/hook", method="POST").respond_with_data("busy", status=503)
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("", status=204)
    audit = ended(owner, new=CRITICAL_NEW, webhook=httpserver_ipv4.url_for("/hook"))

    assert notify(audit.pk) == f"audit {audit.pk}: webhook retry, email sent"
    row = Notification.objects.get(audit=audit, channel="webhook")
    assert row.tries == 1 and timezone.now() + LATER_DELAYS[0] - timedelta(minutes=1) < row.retry_at
    with django_capture_on_commit_callbacks(execute=True):
        run_watchdog()
    assert f"audit-{audit.pk}-notify" not in queued_task_names()  # not due yet

    come_due(audit)
    with django_capture_on_commit_callbacks(execute=True):
        assert "enqueued the alerts tried again" in run_watchdog()
    assert f"audit-{audit.pk}-notify" in queued_task_names()
    assert notify(audit.pk) == f"audit {audit.pk}: webhook sent"
    assert rows(audit) == {"webhook": ("sent", "HTTP 204"), "email": ("sent", "owner@example.com")}
    assert Notification.objects.get(audit=audit, channel="webhook").tries == 2
    assert len(mailoutbox) == 1 and len(httpserver_ipv4.log) == 2


def test_an_alert_still_undelivered_after_every_round_is_recorded_failed(alerts, owner, httpserver_ipv4):
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("busy", status=503)
    audit = ended(owner, new=CRITICAL_NEW, webhook=httpserver_ipv4.url_for("/hook"), notify_email=False)
    notify(audit.pk)
    for _ in LATER_DELAYS:
        come_due(audit)
        notify(audit.pk)
    row = Notification.objects.get(audit=audit, channel="webhook")
    assert (row.state, row.tries, row.retry_at) == ("failed", len(LATER_DELAYS) + 1, None)
    assert len(httpserver_ipv4.log) == len(LATER_DELAYS) + 1
    come_due(audit)
    assert notify(audit.pk) == f"audit {audit.pk}: already notified"


def test_an_alert_waiting_to_be_sent_again_is_dropped_once_the_site_turns_its_alerts_off(
        alerts, owner, httpserver_ipv4):
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("busy", status=503)
    audit = ended(owner, new=CRITICAL_NEW, webhook=httpserver_ipv4.url_for("/hook"), notify_email=False)
    notify(audit.pk)
    Site.objects.filter(pk=audit.site_id).update(notify_severity="")
    come_due(audit)
    assert notify(audit.pk) == f"audit {audit.pk}: nothing due"
    assert rows(audit)["webhook"][0] == "failed" and len(httpserver_ipv4.log) == 1

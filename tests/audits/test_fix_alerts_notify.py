"""Alerts after a resume, and alerts whose sending task died: each end of an audit told once, none left "Sending".

Webhooks go to a pytest-httpserver on 127.0.0.1; ALLOW_PRIVATE_TARGETS lets the guard reach it.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from audits import diff
from audits.models import Audit, Notification
from audits.notify import STUCK_DETAIL, due_audits, notify
from audits.services import resume_audit
from audits.watchdog import run_watchdog
from tests.audits.test_notify import CRITICAL_NEW, ended
from tests.factories import make_issue

pytestmark = pytest.mark.django_db



def complete_resumed(audit: Audit, new=CRITICAL_NEW) -> Audit:
    """Resume ``audit`` as the screens do, then carry it to completed with ``new`` issues, as finalize would."""
    assert resume_audit(audit)
    assert audit.resume_crawl() and audit.begin_finalize()
    for n, (code, url, *target) in enumerate(new):
        make_issue(audit, code, url, target_url=target[0] if target else "", change="new", key=f"resumed{n}")
    Audit.objects.filter(pk=audit.pk).update(change_counts=diff.stored_counts(audit))
    assert audit.finish()
    return audit


def test_a_resumed_audit_that_completes_after_its_failure_alert_sends_its_completion_alert(
        alerts, owner, mailoutbox, hook):
    audit = ended(owner, status=Audit.Status.FAILED, webhook=hook.url_for("/hook"))
    assert notify(audit.pk) == f"audit {audit.pk}: webhook sent, email sent"

    complete_resumed(audit)

    assert list(due_audits().values_list("pk", flat=True)) == [audit.pk]  # the watchdog would send it too
    assert notify(audit.pk) == f"audit {audit.pk}: webhook sent, email sent"
    assert notify(audit.pk) == f"audit {audit.pk}: already notified"
    assert [mail.subject for mail in mailoutbox] == [
        "[Siteward] Audit of https://shop.example/ failed",
        "[Siteward] 3 new critical issues on https://shop.example/"]
    assert [json.loads(request.get_data())["event"] for request, _ in hook.log] == ["audit.failed",
                                                                                    "audit.completed"]
    assert sorted(Notification.objects.filter(audit=audit).values_list("event", "channel", "state")) == [
        ("completed", "email", "sent"), ("completed", "webhook", "sent"),
        ("failed", "email", "sent"), ("failed", "webhook", "sent")]
    assert not due_audits().exists()


def test_an_alert_left_sending_by_a_killed_task_is_recorded_failed_by_the_watchdog_and_shown_so(
        alerts, owner, owner_client, mailoutbox, hook):
    audit = ended(owner, new=CRITICAL_NEW, webhook=hook.url_for("/hook"))
    # What a task killed between its claims and its sends leaves: both rows claimed, neither recorded.
    killed_at = timezone.now() - timedelta(seconds=django_settings.Q_CLUSTER["timeout"] + 1)
    for channel in Notification.Channel.values:
        row = Notification.objects.create(audit=audit, event="completed", channel=channel,
                                          reason="3 new critical issues")
        Notification.objects.filter(pk=row.pk).update(created_at=killed_at, claimed_at=killed_at)
    # Another audit's alert claimed just now: its task may still be sending it.
    live = ended(owner, new=CRITICAL_NEW)
    Notification.objects.create(audit=live, event="completed", channel="email", reason="3 new critical issues")

    result = run_watchdog()

    assert "recorded 2 alert(s) stuck sending as failed" in result
    assert set(Notification.objects.filter(audit=audit).values_list("state", "detail")) == {
        ("failed", STUCK_DETAIL)}
    assert Notification.objects.get(audit=live).state == "sending"
    assert mailoutbox == [] and hook.log == []  # never sent again: the dead task may have sent it
    assert notify(audit.pk) == f"audit {audit.pk}: already notified"
    page = owner_client.get(audit.site.get_absolute_url()).content.decode()
    log = re.search(r'<ul class="plain" id="alert-log".*?</ul>', page, re.S).group(0)
    assert log.count("<strong>not delivered</strong>") == 2 and "it may not have been delivered" in log
    assert "stuck sending" not in run_watchdog()  # a second pass finds nothing more

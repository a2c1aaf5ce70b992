"""An alert waiting to be sent again that never can be (its webhook removed, its audit resumed, a day gone) is
recorded not delivered, saying why; the watchdog sends again only what can still go, oldest first.

Webhooks go to a pytest-httpserver on 127.0.0.1; ALLOW_PRIVATE_TARGETS lets the guard reach it.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from audits import diff
from audits import notify as notify_module
from audits.models import Audit, Notification
from audits.notify import notify
from audits.services import resume_audit
from audits.watchdog import NOTIFY_PER_TICK, queued_task_names, run_watchdog
from tests.audits.test_fix_alerts_notify import complete_resumed
from tests.audits.test_fix_alerts_webhook_url import schedule_data
from tests.audits.test_notify import CRITICAL_NEW, ended, rows
from tests.factories import make_issue

pytestmark = pytest.mark.django_db



@pytest.fixture
def quick(alerts, monkeypatch):
    """One try a round: a 503 puts the alert in RETRY at once."""
    monkeypatch.setattr(notify_module, "RETRY_DELAYS", ())
    return alerts


@pytest.fixture
def busy_hook(httpserver_ipv4):
    """Answers 503 to the first POST /hook, 204 after."""
    httpserver_ipv4.expect_oneshot_request("/hook", method="POST").respond_with_data("busy", status=503)
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("", status=204)
    return httpserver_ipv4


def come_due(audit) -> None:
    Notification.objects.filter(audit=audit, state=Notification.State.RETRY).update(
        retry_at=timezone.now() - timedelta(seconds=1))


def finish_with_new_issues(audit: Audit) -> bool:
    """Carry a finalizing audit to completed with new critical issues, as finalize would."""
    for n, (code, url, *target) in enumerate(CRITICAL_NEW):
        make_issue(audit, code, url, target_url=target[0] if target else "", change="new", key=f"resumed{n}")
    Audit.objects.filter(pk=audit.pk).update(change_counts=diff.stored_counts(audit))
    return audit.finish()


def watch(capture) -> str:
    """One watchdog pass, its enqueues committed."""
    with capture(execute=True):
        return run_watchdog()


def waiting(audit, channel="webhook", event="completed", due_ago=timedelta(seconds=1)) -> Notification:
    """What ``_record`` leaves after a round the other end surely did not take."""
    return Notification.objects.create(
        audit=audit, event=event, channel=channel, state=Notification.State.RETRY, tries=1,
        reason="3 new critical issues", retry_at=timezone.now() - due_ago,
        detail="HTTP 503 (after 3 tries); tried again at 2025-01-01 00:05 UTC")


def test_an_alert_waiting_for_a_webhook_the_owner_then_removed_is_recorded_not_delivered_and_never_queued(
        quick, owner, owner_client, busy_hook, mailoutbox, django_capture_on_commit_callbacks):
    audit = ended(owner, new=CRITICAL_NEW, webhook=busy_hook.url_for("/hook"))
    assert notify(audit.pk) == f"audit {audit.pk}: webhook retry, email sent"
    response = owner_client.post(reverse("site-schedule", args=[audit.site_id]), schedule_data(webhook_url=""))
    assert response.status_code == 302
    come_due(audit)

    watch(django_capture_on_commit_callbacks)

    assert f"audit-{audit.pk}-notify" not in queued_task_names()
    state, detail = rows(audit)["webhook"]
    assert state == "failed"
    assert detail == f"{notify_module.CHANNEL_REMOVED} (last try: HTTP 503: busy)"
    page = owner_client.get(audit.site.get_absolute_url()).content.decode()
    log = re.search(r'<ul class="plain" id="alert-log".*?</ul>', page, re.S).group(0)
    assert "not delivered yet" not in log and escape(notify_module.CHANNEL_REMOVED) in log
    assert notify(audit.pk) == f"audit {audit.pk}: already notified"
    assert len(busy_hook.log) == 1 and len(mailoutbox) == 1


def test_a_failure_alert_waiting_when_the_audit_is_resumed_is_superseded_and_the_completion_is_told(
        quick, owner, busy_hook, mailoutbox, django_capture_on_commit_callbacks):
    audit = ended(owner, status=Audit.Status.FAILED, webhook=busy_hook.url_for("/hook"))
    assert notify(audit.pk) == f"audit {audit.pk}: webhook retry, email sent"
    assert resume_audit(audit) and audit.resume_crawl()
    come_due(audit)

    watch(django_capture_on_commit_callbacks)  # while the audit runs again: neither sent nor given up

    assert f"audit-{audit.pk}-notify" not in queued_task_names()
    assert Notification.objects.get(audit=audit, event="failed", channel="webhook").state == "retry"
    assert audit.begin_finalize() and finish_with_new_issues(audit)
    watch(django_capture_on_commit_callbacks)
    failed = Notification.objects.get(audit=audit, event="failed", channel="webhook")
    assert (failed.state, failed.detail, failed.retry_at) == (
        "failed", f"{notify_module.SUPERSEDED} (last try: HTTP 503: busy)", None)
    assert notify(audit.pk) == f"audit {audit.pk}: webhook sent, email sent"
    assert [json.loads(request.get_data())["event"] for request, _ in busy_hook.log] == [
        "audit.failed", "audit.completed"]


def test_a_failure_alert_waiting_when_the_resumed_audit_fails_again_goes_with_the_new_failure(
        quick, owner, busy_hook, mailoutbox, django_capture_on_commit_callbacks):
    """Given up at the resume, it would never be sent: the second failure finds its row and sends nothing."""
    audit = ended(owner, status=Audit.Status.FAILED, webhook=busy_hook.url_for("/hook"))
    notify(audit.pk)
    assert resume_audit(audit) and audit.resume_crawl()
    come_due(audit)
    watch(django_capture_on_commit_callbacks)
    assert audit.fail(Audit.ErrorCode.STALLED, "stalled again")
    come_due(audit)
    posted = len(busy_hook.log)

    notify(audit.pk)

    assert Notification.objects.get(audit=audit, event="failed", channel="webhook").state == "sent"
    (request, _), = busy_hook.log[posted:]  # tried again, with the new failure
    assert json.loads(request.get_data())["event"] == "audit.failed"


def test_the_completions_notify_settles_a_failure_alert_still_waiting_from_before_the_resume(
        quick, owner, busy_hook, mailoutbox):
    audit = ended(owner, status=Audit.Status.FAILED, webhook=busy_hook.url_for("/hook"))
    notify(audit.pk)
    complete_resumed(audit)  # quicker than a watchdog pass
    come_due(audit)

    assert notify(audit.pk) == f"audit {audit.pk}: webhook sent, email sent"

    assert Notification.objects.get(audit=audit, event="failed", channel="webhook").state == "failed"
    assert not Notification.objects.filter(state=Notification.State.RETRY).exists()


def test_an_alert_still_waiting_a_day_after_its_first_try_is_given_up(
        alerts, owner, django_capture_on_commit_callbacks):
    audit = ended(owner, new=CRITICAL_NEW)
    row = waiting(audit, channel="email")
    Notification.objects.filter(pk=row.pk).update(created_at=timezone.now() - notify_module.SWEEP_WINDOW
                                                  - timedelta(minutes=1))

    watch(django_capture_on_commit_callbacks)

    assert f"audit-{audit.pk}-notify" not in queued_task_names()
    assert rows(audit)["email"] == ("failed", f"{notify_module.EXPIRED} (last try: HTTP 503 (after 3 tries))")


def test_alerts_that_can_never_be_sent_do_not_keep_a_later_audits_alert_from_being_sent_again(
        alerts, owner, django_capture_on_commit_callbacks):
    # More stuck rows than a tick's budget, all of older audits: webhooks the site no longer has,
    # and failure alerts of audits running again since.
    for n in range(NOTIFY_PER_TICK + 1):
        if n % 2:
            waiting(ended(owner, status=Audit.Status.RUNNING), event="failed")
        else:
            waiting(ended(owner, new=CRITICAL_NEW))
    later = ended(owner, new=CRITICAL_NEW)
    waiting(later, channel="email")

    watch(django_capture_on_commit_callbacks)

    assert {name for name in queued_task_names() if name.endswith("-notify")} == {f"audit-{later.pk}-notify"}


def test_alerts_already_queued_for_a_busy_worker_leave_the_next_ticks_budget_to_the_others(
        alerts, owner, django_capture_on_commit_callbacks):
    audits = [ended(owner, new=CRITICAL_NEW) for _ in range(NOTIFY_PER_TICK + 1)]
    for audit in audits:
        waiting(audit, channel="email")

    first = watch(django_capture_on_commit_callbacks)
    second = watch(django_capture_on_commit_callbacks)  # no worker took the first tick's tasks

    assert first.count("enqueued the alerts tried again") == NOTIFY_PER_TICK
    assert second.count("enqueued the alerts tried again") == 1
    assert {f"audit-{audit.pk}-notify" for audit in audits} <= queued_task_names()


def test_the_alert_waiting_longest_is_sent_again_first(alerts, owner, django_capture_on_commit_callbacks):
    audits = [ended(owner, new=CRITICAL_NEW) for _ in range(NOTIFY_PER_TICK + 1)]
    for audit in audits[:-1]:
        waiting(audit, channel="email")
    waiting(audits[-1], channel="email", due_ago=timedelta(hours=1))

    watch(django_capture_on_commit_callbacks)

    assert f"audit-{audits[-1].pk}-notify" in queued_task_names()

"""A scheduled run that completes after failed runs an alert told of sends one "recovered" alert, saying since when.

Webhooks go to a pytest-httpserver on 127.0.0.1; ALLOW_PRIVATE_TARGETS lets the guard reach it. Runs complete
through ``Audit.finish``, as finalize ends them, at times travelled to with time_machine.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine

from audits import diff
from audits.models import Audit, Notification, Site
from audits.notify import RECOVERED, due_audits, notify
from audits.watchdog import queued_task_names, run_watchdog
from tests.audits.test_alerts_repeated_failures import START, failure_nobody_heard_of, run_at
from tests.audits.test_notify import CRITICAL_NEW, rows
from tests.factories import make_audit, make_issue

pytestmark = pytest.mark.django_db



def completes(owner, moment, new=()) -> Audit:
    """A scheduled run started at ``moment`` and carried to completed a minute later, with ``new`` issues."""
    with time_machine.travel(moment, tick=False):
        audit = make_audit(owner, trigger=Audit.Trigger.SCHEDULE, status=Audit.Status.FINALIZING)
    for n, (code, url, *target) in enumerate(new):
        make_issue(audit, code, url, target_url=target[0] if target else "", change="new", key=f"k{n}")
    Audit.objects.filter(pk=audit.pk).update(change_counts=diff.stored_counts(audit))
    with time_machine.travel(moment + timedelta(minutes=1), tick=False):
        assert audit.finish()
    return audit


def payloads(hook) -> list[dict]:
    return [json.loads(request.get_data()) for request, _ in hook.log]


def test_a_run_completing_after_alerted_failures_sends_one_recovered_alert_saying_since_when(
        alerts, owner, mailoutbox, hook):
    for n in range(3):
        notify(run_at(owner, START + timedelta(hours=n), webhook=hook.url_for("/hook")).pk)
    back = completes(owner, START + timedelta(hours=3))

    with time_machine.travel(START + timedelta(hours=3, minutes=5)):
        assert list(due_audits().values_list("pk", flat=True)) == [back.pk]  # a lost task's recovery is swept too
    assert notify(back.pk) == f"audit {back.pk}: webhook sent, email sent"
    assert notify(back.pk) == f"audit {back.pk}: already notified"

    assert [mail.subject for mail in mailoutbox] == ["[Siteward] Audit of https://shop.example/ failed",
                                                     "[Siteward] Audit of https://shop.example/ recovered"]
    assert mailoutbox[1].body.startswith(
        "The scheduled audit of https://shop.example/ completed (2026-03-02 05:01 UTC): the site has recovered. "
        "Its scheduled audits had failed since 2026-03-02 02:01 UTC.\n")
    failed, recovered = payloads(hook)
    assert (failed["event"], failed["recovered"], failed["failing_since"]) == (
        "audit.failed", False, "2026-03-02T02:01:20+00:00")
    assert {key: recovered[key] for key in ("event", "audit_id", "status", "recovered", "failing_since")} == {
        "event": "audit.completed", "audit_id": back.pk, "status": "completed", "recovered": True,
        "failing_since": "2026-03-02T02:01:20+00:00"}
    assert Notification.objects.get(audit=back, channel="email").reason == \
        "recovered, failing since 2026-03-02 02:01 UTC"
    later = completes(owner, START + timedelta(hours=4))
    assert notify(later.pk) == f"audit {later.pk}: nothing due"  # recovered once, not at every run after


def test_a_recovery_with_new_issues_tells_both_in_one_alert(alerts, owner, mailoutbox):
    notify(run_at(owner, START).pk)
    back = completes(owner, START + timedelta(hours=1), new=CRITICAL_NEW)

    assert notify(back.pk) == f"audit {back.pk}: email sent"

    recovered = mailoutbox[1]
    assert recovered.subject == "[Siteward] Audit of https://shop.example/ recovered: 3 new critical issues"
    assert "It found 3 new critical issues since the previous completed audit." in recovered.body
    assert "[http_4xx] Page returns 4xx: https://shop.example/gone" in recovered.body


def test_a_site_with_new_issue_alerts_off_is_still_told_it_recovered(alerts, owner, mailoutbox):
    notify(run_at(owner, START).pk)
    Site.objects.update(notify_severity="")
    back = completes(owner, START + timedelta(hours=1), new=CRITICAL_NEW)

    assert notify(back.pk) == f"audit {back.pk}: email sent"
    assert mailoutbox[1].subject == "[Siteward] Audit of https://shop.example/ recovered"
    assert "new critical" not in mailoutbox[1].body


def test_no_recovered_alert_when_no_alert_told_of_the_failures(alerts, owner, mailoutbox):
    failure_nobody_heard_of(owner)
    back = completes(owner, START + timedelta(hours=1))

    assert notify(back.pk) == f"audit {back.pk}: nothing due"
    assert mailoutbox == []


def test_no_recovered_alert_once_the_site_turned_failure_alerts_off(alerts, owner, mailoutbox):
    notify(run_at(owner, START).pk)
    Site.objects.update(notify_on_failure=False)
    back = completes(owner, START + timedelta(hours=1))

    assert notify(back.pk) == f"audit {back.pk}: nothing due"
    assert len(mailoutbox) == 1


def test_a_recovered_alert_waiting_to_be_sent_again_stays_due_when_the_failure_alerts_are_settled(
        alerts, owner, httpserver_ipv4, monkeypatch):
    monkeypatch.setattr("audits.notify.RETRY_DELAYS", ())
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("busy", status=503)
    down = run_at(owner, START, webhook=httpserver_ipv4.url_for("/hook"), notify_email=False)
    notify(down.pk)
    back = completes(owner, START + timedelta(hours=1))
    assert notify(back.pk) == f"audit {back.pk}: webhook retry, email skipped"
    # The failure alert, still undelivered, runs out of rounds: it told nobody after all.
    Notification.objects.filter(audit=down).update(state=Notification.State.FAILED, retry_at=None)
    Notification.objects.filter(audit=back).update(retry_at=START)

    assert notify(back.pk) == f"audit {back.pk}: webhook retry"
    assert rows(back)["webhook"][0] == "retry" and len(httpserver_ipv4.log) == 3


def test_a_failure_alert_still_waiting_when_the_site_recovers_is_never_sent_after_the_recovered_one(
        alerts, owner, httpserver_ipv4, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr("audits.notify.RETRY_DELAYS", ())
    httpserver_ipv4.expect_oneshot_request("/hook", method="POST").respond_with_data("busy", status=503)
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("", status=204)
    down = run_at(owner, START, webhook=httpserver_ipv4.url_for("/hook"), notify_email=False)
    assert notify(down.pk) == f"audit {down.pk}: webhook retry, email skipped"
    back = completes(owner, START + timedelta(hours=1))

    assert notify(back.pk) == f"audit {back.pk}: webhook sent, email skipped"

    state, detail = rows(down)["webhook"]
    assert (state, detail) == ("failed", f"{RECOVERED} (last try: HTTP 503: busy)")
    Notification.objects.filter(audit=down).update(retry_at=START)
    with django_capture_on_commit_callbacks(execute=True):
        run_watchdog()
    assert f"audit-{down.pk}-notify" not in queued_task_names()
    assert notify(down.pk) == f"audit {down.pk}: already notified"
    assert [payload["event"] for payload in payloads(httpserver_ipv4)] == ["audit.failed", "audit.completed"]

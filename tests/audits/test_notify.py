"""Alerts for scheduled audits: e-mail through Django's backend, webhooks to a loopback server, each once.

All webhook traffic goes to servers on 127.0.0.1; a test that must reach one
turns on ALLOW_PRIVATE_TARGETS, the deployment setting the webhook guard reads.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from audits import diff
from audits.models import Audit, Notification
from audits.notify import due_audits, notify
from tests.factories import SITE, make_audit, make_finished_audit, make_issue, make_page

pytestmark = pytest.mark.django_db

BASE = "https://siteward.test"
SCHEDULE = Audit.Trigger.SCHEDULE



def ended(owner, *, status=Audit.Status.COMPLETED, trigger=SCHEDULE, new=(), webhook="", finished_at=None,
          **site_fields) -> Audit:
    """An ended audit whose issues in ``new`` are new since the previous one, counted as diff.record would."""
    audit = make_audit(
        owner, trigger=trigger, status=status,
        phase=Audit.Phase.DONE if status == Audit.Status.COMPLETED else Audit.Phase.CRAWLING,
        finished_at=finished_at or timezone.now(), origin=SITE,
    )
    for n, (code, url, *target) in enumerate(new):
        make_issue(audit, code, url, target_url=target[0] if target else "", change="new", key=f"k{n}")
    if status == Audit.Status.COMPLETED:
        audit.change_counts = diff.stored_counts(audit)
        Audit.objects.filter(pk=audit.pk).update(change_counts=audit.change_counts)
    else:
        Audit.objects.filter(pk=audit.pk).update(
            error_code=Audit.ErrorCode.SITE_UNAVAILABLE, error_detail="The start page answered 503 three times",
            failed_phase=Audit.Phase.STARTING)
    if webhook or site_fields:
        type(audit.site).objects.filter(pk=audit.site_id).update(webhook_url=webhook, **site_fields)
    audit.refresh_from_db()
    return audit


CRITICAL_NEW = [("http_4xx", f"{SITE}/gone"), ("broken_link_internal", f"{SITE}/", f"{SITE}/gone"),
                ("http_5xx", f"{SITE}/down")]


def rows(audit) -> dict[str, tuple[str, str]]:
    return {n.channel: (n.state, n.detail) for n in Notification.objects.filter(audit=audit)}


# ------------------------------------------------------------------ e-mail


def test_new_critical_issues_on_a_scheduled_audit_email_the_owner_with_the_since_previous_link(
        alerts, owner, mailoutbox):
    audit = ended(owner, new=CRITICAL_NEW + [("meta_description_missing", f"{SITE}/about")])

    summary = notify(audit.pk)

    assert summary == f"audit {audit.pk}: email sent"
    [mail] = mailoutbox
    assert mail.to == ["owner@example.com"]
    assert mail.subject == f"[Siteward] 3 new critical issues on {SITE}/"
    link = f"{BASE}/audits/{audit.pk}/#changes"
    assert link in mail.body
    assert f"[http_4xx] Page returns 4xx: {SITE}/gone" in mail.body
    assert f"[broken_link_internal] Broken internal link: {SITE}/ -> {SITE}/gone" in mail.body
    assert "meta_description_missing" not in mail.body  # a warning, below the site's "critical"
    assert "Fixed since the previous audit: 0" in mail.body
    assert rows(audit) == {"email": ("sent", "owner@example.com")}
    assert Notification.objects.get(audit=audit).reason == "3 new critical issues"


def test_a_warning_threshold_alerts_on_new_critical_and_warning_issues_and_lists_at_most_twenty(
        alerts, owner, mailoutbox):
    new = [("http_4xx", f"{SITE}/gone")] + [("h1_missing", f"{SITE}/p{n}") for n in range(24)] \
        + [("thin_content", f"{SITE}/thin")]
    audit = ended(owner, new=new, notify_severity="warning")

    notify(audit.pk)

    [mail] = mailoutbox
    assert mail.subject == f"[Siteward] 25 new issues (1 critical, 24 warning) on {SITE}/"
    listed = [line for line in mail.body.splitlines() if line.startswith("  - ")]
    assert len(listed) == 20
    assert listed[0].startswith("  - [http_4xx]")  # most important first
    assert "... and 5 more." in mail.body
    assert "thin_content" not in mail.body


def test_the_email_counts_issues_fixed_since_the_baseline_written_by_diff_record(alerts, owner, mailoutbox):
    before = make_finished_audit(owner, trigger=SCHEDULE)
    after = make_finished_audit(owner, trigger=SCHEDULE)
    make_page(after, f"{SITE}/down", status_code=500)
    make_issue(after, "http_5xx", f"{SITE}/down")
    after.issues.filter(code="title_length").delete()  # fixed: its page still answered
    diff.record(after)
    assert after.baseline_id == before.pk

    notify(after.pk)

    [mail] = mailoutbox
    assert mail.subject == f"[Siteward] 1 new critical issue on {SITE}/"
    assert "Fixed since the previous audit: 1" in mail.body


def test_new_issues_a_sites_ignore_rule_ignored_send_no_alert_and_are_not_listed(alerts, owner, mailoutbox):
    from audits.models import IgnoreRule

    before = make_finished_audit(owner, trigger=SCHEDULE)
    after = make_finished_audit(owner, trigger=SCHEDULE)
    make_page(after, f"{SITE}/legacy/old", status_code=404)
    make_issue(after, "http_4xx", f"{SITE}/legacy/old")
    IgnoreRule.objects.create(site=after.site, code="http_4xx", pattern="/legacy/")
    diff.record(after)
    assert after.baseline_id == before.pk
    assert after.issues.get(url=f"{SITE}/legacy/old").review == "ignored"
    assert after.change_counts["issues"]["new"]["critical"] == 0

    notify(after.pk)
    assert mailoutbox == []


def test_an_owner_without_an_email_address_is_recorded_skipped_and_nothing_is_mailed(alerts, owner, mailoutbox):
    type(owner).objects.filter(pk=owner.pk).update(email="")
    audit = ended(owner, new=CRITICAL_NEW)

    notify(audit.pk)

    assert mailoutbox == []
    assert rows(audit) == {"email": ("skipped", "The owner has no e-mail address")}


def test_email_alerts_turned_off_are_recorded_skipped_while_the_webhook_is_still_posted(
        alerts, owner, mailoutbox, hook):
    audit = ended(owner, new=CRITICAL_NEW, webhook=hook.url_for("/hook"), notify_email=False)

    notify(audit.pk)

    assert mailoutbox == []
    assert len(hook.log) == 1
    assert rows(audit) == {"email": ("skipped", "E-mail alerts are off for this site"),
                           "webhook": ("sent", "HTTP 204")}


def test_an_email_backend_error_is_recorded_failed_not_raised(alerts, owner, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("No route to host")  # not surely untaken: no retry (test_email_alert_retries)

    monkeypatch.setattr("audits.notify.send_mail", refuse)
    audit = ended(owner, new=CRITICAL_NEW)

    assert notify(audit.pk) == f"audit {audit.pk}: email failed"
    assert rows(audit) == {"email": ("failed", "OSError: No route to host")}


# ------------------------------------------------------------------ webhook


class TaskKilled(BaseException):
    """What django-q2 does to a task past its timeout, as far as the task can tell."""


def test_the_webhook_goes_out_before_a_mail_server_can_hold_the_task_past_its_timeout(
        alerts, owner, hook, monkeypatch):
    def hangs_until_killed(*args, **kwargs):
        raise TaskKilled()

    monkeypatch.setattr("audits.notify.send_mail", hangs_until_killed)
    audit = ended(owner, new=CRITICAL_NEW, webhook=hook.url_for("/hook"))
    with pytest.raises(TaskKilled):
        notify(audit.pk)
    assert len(hook.log) == 1
    assert rows(audit)["webhook"] == ("sent", "HTTP 204")


def test_the_webhook_receives_the_json_summary_exactly_once_when_notify_runs_twice(
        alerts, owner, mailoutbox, hook):
    audit = ended(owner, new=CRITICAL_NEW + [("h1_missing", f"{SITE}/a")], webhook=hook.url_for("/hook"))
    Audit.objects.filter(pk=audit.pk).update(issues_critical=7, issues_warning=2, issues_notice=1)

    first = notify(audit.pk)
    second = notify(audit.pk)

    assert first == f"audit {audit.pk}: webhook sent, email sent"
    assert second == f"audit {audit.pk}: already notified"
    assert len(mailoutbox) == 1
    [(request, response)] = hook.log
    assert response.status_code == 204
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.get_data()) == {
        "event": "audit.completed", "audit_id": audit.pk, "site_id": audit.site_id, "start_url": f"{SITE}/",
        "status": "completed", "error_code": "", "url": f"{BASE}/audits/{audit.pk}/#changes",
        "baseline_id": None,
        "changes": {"new": 4, "fixed": 0, "persisting": 0, "unknown": 0},
        "new_issues": {"critical": 3, "warning": 1, "notice": 0},
        "issues": {"critical": 7, "warning": 2, "notice": 1},
        "recovered": False, "failing_since": None,
    }
    # Signed with the site's key, over the very bytes sent, as a receiver checks it.
    key = audit.site.webhook_secret()
    expected = "sha256=" + hmac.new(key.encode(), request.get_data(), hashlib.sha256).hexdigest()
    assert hmac.compare_digest(request.headers["X-Siteward-Signature-256"], expected)
    assert rows(audit) == {"email": ("sent", "owner@example.com"), "webhook": ("sent", "HTTP 204")}


def test_a_webhook_on_a_loopback_address_is_refused_and_recorded_failed_when_private_targets_are_off(
        alerts, owner, mailoutbox, hook):
    alerts.SITEWARD = {**alerts.SITEWARD, "ALLOW_PRIVATE_TARGETS": False}
    audit = ended(owner, new=CRITICAL_NEW, webhook=hook.url_for("/hook"))

    notify(audit.pk)

    assert hook.log == []
    state, detail = rows(audit)["webhook"]
    assert state == "failed"
    assert detail.startswith("Refused: 127.0.0.1 is a loopback address")
    assert len(mailoutbox) == 1  # the other channel is unaffected


def test_a_site_allowed_private_crawl_targets_does_not_let_its_webhook_reach_loopback(alerts, owner, hook):
    alerts.SITEWARD = {**alerts.SITEWARD, "ALLOW_PRIVATE_TARGETS": False}
    audit = ended(owner, new=CRITICAL_NEW, webhook=hook.url_for("/hook"), allow_private=True)

    notify(audit.pk)

    assert hook.log == []
    assert rows(audit)["webhook"][0] == "failed"


@pytest.fixture
def silent_server():
    """A server on 127.0.0.1 that accepts connections, reads, and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)  # close() does not wake a blocked accept(); the loop polls a flag
    stop = threading.Event()
    held: list[socket.socket] = []
    received = bytearray()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)
            conn.settimeout(5)
            try:
                received.extend(conn.recv(65536))
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], received
    stop.set()
    thread.join(timeout=5)
    listener.close()
    for conn in held:
        conn.close()


def test_a_webhook_that_never_answers_is_recorded_failed_within_the_timeout(alerts, owner, silent_server):
    port, received = silent_server
    alerts.SITEWARD = {**alerts.SITEWARD, "WEBHOOK_TIMEOUT": 0.5}
    audit = ended(owner, new=CRITICAL_NEW, webhook=f"http://127.0.0.1:{port}/hook")

    started = time.monotonic()
    notify(audit.pk)
    elapsed = time.monotonic() - started

    assert 0.5 <= elapsed < 2.5
    assert received.startswith(b"POST /hook HTTP/1.1")  # it was sent, and no answer came
    assert rows(audit)["webhook"] == ("failed", "No answer within 0.5 s")


def test_a_webhook_answering_500_is_recorded_failed_with_the_status(alerts, owner, httpserver_ipv4):
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("boom " * 5000, status=500)
    audit = ended(owner, new=CRITICAL_NEW, webhook=httpserver_ipv4.url_for("/hook"))

    notify(audit.pk)

    state, detail = rows(audit)["webhook"]
    assert state == "failed"
    assert detail.startswith("HTTP 500: boom boom")
    assert len(detail) <= 300
    assert len(httpserver_ipv4.log) == 1


def test_a_webhook_redirect_is_recorded_failed_and_not_followed(alerts, owner, httpserver_ipv4):
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data(
        "", status=307, headers={"Location": httpserver_ipv4.url_for("/elsewhere")})
    audit = ended(owner, new=CRITICAL_NEW, webhook=httpserver_ipv4.url_for("/hook"))

    notify(audit.pk)

    assert rows(audit)["webhook"] == (
        "failed", f"HTTP 307: redirect to {httpserver_ipv4.url_for('/elsewhere')} not followed")
    assert [request.path for request, _ in httpserver_ipv4.log] == ["/hook"]


def test_a_webhook_with_nothing_listening_is_sent_again_later(alerts, owner):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed again: nothing listens there
    audit = ended(owner, new=CRITICAL_NEW, webhook=f"http://127.0.0.1:{port}/hook")

    notify(audit.pk)

    state, detail = rows(audit)["webhook"]
    assert state == "retry" and detail.startswith("Could not connect")


# ------------------------------------------------------------------ what is due


@pytest.mark.parametrize("trigger", [Audit.Trigger.MANUAL, Audit.Trigger.COMMAND])
def test_audits_not_started_by_a_schedule_never_notify(alerts, owner, mailoutbox, hook, trigger):
    done = ended(owner, trigger=trigger, new=CRITICAL_NEW, webhook=hook.url_for("/hook"))
    failed = ended(owner, trigger=trigger, status=Audit.Status.FAILED, webhook=hook.url_for("/hook"))

    assert notify(done.pk) == f"audit {done.pk}: not scheduled, no alerts"
    assert notify(failed.pk) == f"audit {failed.pk}: not scheduled, no alerts"
    assert mailoutbox == [] and hook.log == []
    assert not Notification.objects.exists()
    assert not due_audits().exists()


def test_new_issues_below_the_sites_threshold_do_not_notify(alerts, owner, mailoutbox, hook):
    audit = ended(owner, new=[("h1_missing", f"{SITE}/a"), ("thin_content", f"{SITE}/b")],
                  webhook=hook.url_for("/hook"))

    assert notify(audit.pk) == f"audit {audit.pk}: nothing due"
    assert mailoutbox == [] and hook.log == []
    assert not Notification.objects.exists()
    assert not due_audits().exists()


def test_a_site_that_chose_no_new_issue_alerts_is_not_notified_of_new_critical_issues(alerts, owner, mailoutbox):
    audit = ended(owner, new=CRITICAL_NEW, notify_severity="")

    assert notify(audit.pk) == f"audit {audit.pk}: nothing due"
    assert mailoutbox == []


def test_a_first_audit_with_nothing_to_compare_with_does_not_notify(alerts, owner, mailoutbox):
    audit = make_finished_audit(owner, trigger=SCHEDULE)
    assert diff.record(audit) is None

    assert notify(audit.pk) == f"audit {audit.pk}: nothing due"
    assert mailoutbox == []


def test_a_failed_scheduled_audit_notifies_by_email_and_webhook(alerts, owner, mailoutbox, hook):
    audit = ended(owner, status=Audit.Status.FAILED, webhook=hook.url_for("/hook"))

    assert notify(audit.pk) == f"audit {audit.pk}: webhook sent, email sent"

    [mail] = mailoutbox
    assert mail.subject == f"[Siteward] Audit of {SITE}/ failed"
    assert "The start page never answered successfully (site_unavailable)" in mail.body
    assert "The start page answered 503 three times" in mail.body
    assert f"{BASE}/audits/{audit.pk}/#changes" in mail.body
    [(request, _)] = hook.log
    payload = json.loads(request.get_data())
    assert payload["event"] == "audit.failed"
    assert (payload["status"], payload["error_code"]) == ("failed", "site_unavailable")
    assert payload["changes"] == {"new": 0, "fixed": 0, "persisting": 0, "unknown": 0}
    assert Notification.objects.get(audit=audit, channel="email").reason == "audit failed: site_unavailable"


def test_a_failed_scheduled_audit_is_not_notified_when_the_site_turned_failure_alerts_off(
        alerts, owner, mailoutbox):
    audit = ended(owner, status=Audit.Status.FAILED, notify_on_failure=False)

    assert notify(audit.pk) == f"audit {audit.pk}: nothing due"
    assert mailoutbox == []
    assert not due_audits().exists()


@pytest.mark.parametrize("status", [Audit.Status.CANCELLED, Audit.Status.RUNNING])
def test_cancelled_and_unfinished_scheduled_audits_do_not_notify(alerts, owner, mailoutbox, status):
    audit = ended(owner, new=CRITICAL_NEW)
    Audit.objects.filter(pk=audit.pk).update(status=status)

    assert notify(audit.pk) == f"audit {audit.pk}: {status}, no alerts"
    assert mailoutbox == []
    assert not due_audits().exists()


def test_due_audits_lists_recent_scheduled_audits_with_an_alert_due_until_they_are_notified(
        alerts, owner, mailoutbox):
    completed = ended(owner, new=CRITICAL_NEW)
    failed = ended(owner, status=Audit.Status.FAILED)
    ended(owner, new=CRITICAL_NEW, finished_at=timezone.now() - timedelta(hours=25))  # too old to sweep
    ended(owner, new=[("thin_content", f"{SITE}/b")])  # below the threshold
    ended(owner, trigger=Audit.Trigger.MANUAL, new=CRITICAL_NEW)

    assert set(due_audits().values_list("pk", flat=True)) == {completed.pk, failed.pk}

    notify(completed.pk)

    assert list(due_audits().values_list("pk", flat=True)) == [failed.pk]


def test_notify_of_a_missing_audit_says_so(alerts):
    assert notify(987654) == "audit 987654: no such audit"

"""A site whose scheduled runs keep failing the same way is told once, then reminded once a day, not every run.

Webhooks go to a pytest-httpserver on 127.0.0.1; ALLOW_PRIVATE_TARGETS lets the guard reach it. Time is
travelled with time_machine, so each run starts when an hourly or daily schedule would start it.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils.html import escape

from audits.models import Audit, Notification
from audits.notify import due_audits, notify
from tests.audits.test_notify import ended, rows

pytestmark = pytest.mark.django_db

FAILED = Audit.Status.FAILED
START = datetime(2026, 3, 2, 2, 0, 20, tzinfo=UTC)



def run_at(owner, moment: datetime, *, status=FAILED, code=Audit.ErrorCode.SITE_UNAVAILABLE, **fields) -> Audit:
    """A scheduled run of the owner's site started at ``moment`` that ended a minute later, as ``status``."""
    with time_machine.travel(moment, tick=False):
        audit = ended(owner, status=status, finished_at=moment + timedelta(minutes=1), **fields)
    if status == FAILED:
        Audit.objects.filter(pk=audit.pk).update(error_code=code)
        audit.refresh_from_db()
    return audit


def failure_nobody_heard_of(owner) -> Audit:
    """A failed run at ``START`` whose alert was skipped (the owner had no address then; has one now)."""
    type(owner).objects.filter(pk=owner.pk).update(email="")
    down = run_at(owner, START)
    assert notify(down.pk) == f"audit {down.pk}: email skipped"
    type(owner).objects.filter(pk=owner.pk).update(email="owner@example.com")
    return down


def test_a_failure_repeating_the_previous_runs_is_held_back_and_the_site_page_says_why(
        alerts, owner, owner_client, mailoutbox, hook):
    first = run_at(owner, START, webhook=hook.url_for("/hook"))
    assert notify(first.pk) == f"audit {first.pk}: webhook sent, email sent"
    again = run_at(owner, START + timedelta(hours=1))

    assert notify(again.pk) == f"audit {again.pk}: webhook held back, email held back"
    assert notify(again.pk) == f"audit {again.pk}: already notified"

    assert len(mailoutbox) == 1 and len(hook.log) == 1
    assert not due_audits().exists()  # the sweep does not send it either
    [(state, detail)] = set(rows(again).values())
    assert state == "held"
    assert detail == (f"A repeat: the previous scheduled run failed with site_unavailable too, and audit {first.pk}'s "
                      "alert told of it. A reminder goes with the first run failing so from 2026-03-03 02:00 UTC.")
    page = owner_client.get(again.site.get_absolute_url()).content.decode()
    log = re.search(r'<ul class="plain" id="alert-log".*?</ul>', page, re.S).group(0)
    assert log.count("held back: a repeat") == 2 and escape(detail) in log


def test_a_failure_with_another_error_code_than_the_previous_run_is_sent(alerts, owner, mailoutbox):
    notify(run_at(owner, START).pk)
    login = run_at(owner, START + timedelta(hours=1), code=Audit.ErrorCode.LOGIN_FAILED)

    assert notify(login.pk) == f"audit {login.pk}: email sent"

    assert [mail.subject for mail in mailoutbox] == ["[Siteward] Audit of https://shop.example/ failed"] * 2
    assert "Reason: Logging in to the site failed, or its session kept expiring (login_failed)" in mailoutbox[1].body
    assert "Failing since: 2026-03-02 02:01 UTC" in mailoutbox[1].body


def test_a_failure_after_a_completed_run_is_new_and_sent(alerts, owner, mailoutbox):
    notify(run_at(owner, START).pk)
    run_at(owner, START + timedelta(hours=1), status=Audit.Status.COMPLETED)
    down_again = run_at(owner, START + timedelta(hours=2))

    assert notify(down_again.pk) == f"audit {down_again.pk}: email sent"
    assert "Failing since" not in mailoutbox[1].body


def test_a_run_a_person_started_or_cancelled_between_two_failures_does_not_make_the_second_new(
        alerts, owner, mailoutbox):
    notify(run_at(owner, START).pk)
    run_at(owner, START + timedelta(minutes=30), status=Audit.Status.COMPLETED, trigger=Audit.Trigger.MANUAL)
    run_at(owner, START + timedelta(minutes=50), status=Audit.Status.CANCELLED)
    again = run_at(owner, START + timedelta(hours=1))

    assert notify(again.pk) == f"audit {again.pk}: email held back"
    assert len(mailoutbox) == 1


@pytest.mark.parametrize(("every", "drift"), [(timedelta(hours=1), timedelta(0)),
                                              (timedelta(days=1), timedelta(seconds=-15))],
                         ids=["hourly", "daily-starting-sooner"])
def test_a_site_failing_the_same_way_for_days_is_reminded_once_a_day(
        alerts, owner, mailoutbox, hook, every, drift):
    runs = [run_at(owner, START + n * every + (drift if n else timedelta(0)), webhook=hook.url_for("/hook"))
            for n in range(int(timedelta(hours=25) / every) + 1)]

    outcomes = [notify(run.pk).split(": ")[1] for run in runs]

    sent = [n for n, outcome in enumerate(outcomes) if outcome == "webhook sent, email sent"]
    assert sent == [0, len(runs) - 1 if every == timedelta(days=1) else 24]
    assert all(outcomes[n] == "webhook held back, email held back" for n in set(range(len(runs))) - set(sent))
    reminder = mailoutbox[1]
    assert reminder.subject == "[Siteward] Audit of https://shop.example/ still failing"
    assert "Failing since: 2026-03-02 02:01 UTC" in reminder.body
    assert "an alert goes once a day, and the runs in between send none" in reminder.body
    assert Notification.objects.get(audit=runs[sent[1]], channel="email").reason == \
        "audit still failing: site_unavailable"
    assert [json.loads(request.get_data())["event"] for request, _ in hook.log] == ["audit.failed"] * 2


def test_a_repeat_is_sent_when_no_alert_told_of_the_failures_before_it(alerts, owner, mailoutbox):
    failure_nobody_heard_of(owner)
    again = run_at(owner, START + timedelta(hours=1))

    assert notify(again.pk) == f"audit {again.pk}: email sent"
    assert [mail.subject for mail in mailoutbox] == ["[Siteward] Audit of https://shop.example/ still failing"]


def test_a_failure_alert_still_waiting_to_be_sent_again_holds_back_the_repeat(
        alerts, owner, httpserver_ipv4, monkeypatch):
    monkeypatch.setattr("audits.notify.RETRY_DELAYS", ())
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("busy", status=503)
    first = run_at(owner, START, webhook=httpserver_ipv4.url_for("/hook"), notify_email=False)
    notify(first.pk)
    assert rows(first)["webhook"][0] == "retry"
    again = run_at(owner, START + timedelta(hours=1))

    assert notify(again.pk) == f"audit {again.pk}: webhook held back, email held back"

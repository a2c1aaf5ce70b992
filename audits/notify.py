"""Alerts for scheduled audits: an e-mail to the owner and an optional JSON webhook.

A scheduled audit that completed with new issues at or above its site's
``notify_severity``, or failed while its site has ``notify_on_failure``, is
"due"; so is one that completed after failed scheduled runs a failure alert told of
(``Audit.failing_since``), while the site has ``notify_on_failure``: its one
"completed" alert says the site recovered, and since when it was failing. A failure with the error code the site's previous scheduled run failed with is
held back, recorded HELD and sent to nobody, unless the run whose failure alert last
told of it began a day (REMINDER_EVERY) before: then it goes as a "still failing" reminder.
``notify`` sends each channel at most once per event (failed, completed):
the Notification row (unique per audit, event and channel) is the claim, inserted
in state SENDING before anything is sent; only the call that inserted it sends,
then records SENT, FAILED or SKIPPED, or RETRY when the other end surely did not take
it: the watchdog's sweep (``retry_audits``) sends it again after each of LATER_DELAYS,
the row re-claimed by a conditional UPDATE as the insert claimed it, while it can
still be sent: its event is the audit's status, its channel is still set up, its
first try was within SWEEP_WINDOW, and, for a failure, no later scheduled run of the
site has completed (its alert told the failing was over: a late failure alert would undo that). ``give_up_unsendable`` records the rest FAILED,
saying why. A resumed audit that failed and then completed is therefore told twice,
once for each, unless its failure alert was still waiting: that one is superseded.
A call that dies between the claim and the record leaves SENDING: the alert may be
lost, never sent twice, and ``fail_stuck`` records it FAILED once no task can still be sending it.

``due_audits`` is what the watchdog sweeps: due audits of the last day with no
Notification row for their present status yet (a lost enqueue, a failure no task
handler saw).
"""

from __future__ import annotations

import logging
import smtplib
import time
from datetime import UTC, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Case, Exists, F, IntegerField, Min, OuterRef, Q, Subquery, Value, When
from django.urls import reverse
from django.utils import timezone

from crawler.net import AddressGuard
from crawler.webhook import post_json

from . import diff
from .models import Audit, Issue, Notification, Severity, Site
from .models.notification import TRIED_AGAIN

log = logging.getLogger(__name__)

# Most important first: a threshold admits itself and everything before it.
SEVERITIES: tuple[str, ...] = tuple(Severity.values)
# New issues listed in an e-mail; the rest are behind the link.
EMAIL_ISSUES = 20
# Only audits that ended this recently are swept: turning alerts on, or an
# upgrade, must not mail out a backlog of old audits.
SWEEP_WINDOW = timedelta(hours=24)
# The waits before an alert's second and third tries, made only when the other
# end surely did not take the first (a webhook: no connection, 429, 502-504; a
# mail server: a refused connection, or a 4xx, RFC 5321's "try again later"):
# a blip loses no alert, and a send costs at most three timeouts and these few seconds.
RETRY_DELAYS: tuple[float, ...] = (0.5, 2.0)
# Why an alert waiting to be sent again never will be, on the site page in place of when it was due.
SUPERSEDED = "Not sent again: the audit was resumed, so this is no longer how it ended"
RECOVERED = "Not sent again: a later scheduled run completed"
CHANNEL_REMOVED = "Not sent again: the site's webhook was removed"
TURNED_OFF = "Not sent again: the site's alerts were turned off"
EXPIRED = "Not sent again: still undelivered a day after the first try"
# What an alert whose sending task died says on the site page.
STUCK_DETAIL = "Its sending task stopped before it finished (a worker died); it may not have been delivered"
# When an alert the other end surely did not take (the same test as the quick tries') is sent again,
# after each round of quick tries: a mail server or a receiver down for an hour loses no alert.
LATER_DELAYS: tuple[timedelta, ...] = (timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2),
                                       timedelta(hours=6))
# A failure repeating the previous scheduled run's is told again only this long after the run whose alert
# last told of it: an hourly site that is down mails once a day, not 24 times, and a long outage is not forgotten.
REMINDER_EVERY = timedelta(hours=24)
# Measured between the two runs' starts, less this: a daily run that starts a few minutes sooner than
# yesterday's (the scheduler's jitter, a queue) must still remind every day, not every other.
REMINDER_SLACK = timedelta(minutes=30)


def at_or_above(threshold: str) -> tuple[str, ...]:
    """The severities an alert threshold admits; none for "" (never)."""
    if threshold not in SEVERITIES:
        return ()
    return SEVERITIES[: SEVERITIES.index(threshold) + 1]


def _due() -> Q:
    """Audits with something to tell, read from the site's choices and ``change_counts``.

    The same predicate decides in ``notify`` and in ``due_audits``: an audit the
    sweep lists but ``notify`` skipped would fill the watchdog's per-tick budget forever.
    """
    new_enough = Q(pk__in=[])
    for threshold in SEVERITIES:
        any_new = Q(pk__in=[])
        for severity in at_or_above(threshold):
            any_new |= Q(**{f"change_counts__issues__new__{severity}__gt": 0})
        new_enough |= Q(site__notify_severity=threshold) & any_new
    recovered = Q(failing_since__isnull=False, site__notify_on_failure=True)
    return Q(trigger=Audit.Trigger.SCHEDULE) & (
        Q(status=Audit.Status.FAILED, site__notify_on_failure=True)
        | (Q(status=Audit.Status.COMPLETED) & (new_enough | recovered))
    )


def due_audits():
    """Scheduled audits that ended in the last 24 h, have an alert due, and no Notification row for this end yet."""
    return (
        Audit.objects.filter(status__in=[Audit.Status.COMPLETED, Audit.Status.FAILED],
                             trigger=Audit.Trigger.SCHEDULE,
                             finished_at__gte=timezone.now() - SWEEP_WINDOW)
        .filter(_due())
        .exclude(Exists(Notification.objects.filter(audit=OuterRef("pk"), event=OuterRef("status"))))
    )


def _sendable() -> Q:
    """Notification rows waiting to be sent again that ``notify`` would send now, if their audit is due.

    One predicate for ``_reclaim`` and ``retry_audits``, as ``_due`` is for the first send: a row the
    sweep lists and ``notify`` skips is queued at every watchdog pass and holds a slot of its budget.
    SWEEP_WINDOW bounds it as it bounds the sweep: LATER_DELAYS end well within it, and after a long
    outage no backlog goes out.
    """
    now = timezone.now()
    return (Q(state=Notification.State.RETRY, retry_at__lte=now, created_at__gte=now - SWEEP_WINDOW,
              event=F("audit__status"))
            & (Q(channel=Notification.Channel.EMAIL) | ~Q(audit__site__webhook_url=""))
            & ~(Q(event=Notification.Event.FAILED) & _completed_since()))


def _completed_since() -> Exists:
    """A Notification row's site has completed a scheduled run after the row's audit."""
    return Exists(Audit.objects.filter(site=OuterRef("audit__site"), trigger=Audit.Trigger.SCHEDULE,
                                       status=Audit.Status.COMPLETED, pk__gt=OuterRef("audit_id")))


def retry_audits():
    """Due audits with an alert to be sent again now (``_sendable``), with ``first_due``: when the oldest came due.

    The watchdog takes them in that order, so the alert waiting longest goes first, whatever its audit's id.
    """
    sendable = Notification.objects.filter(_sendable())
    first_due = sendable.filter(audit=OuterRef("pk")).order_by("retry_at").values("retry_at")[:1]
    return Audit.objects.filter(_due(), pk__in=sendable.values("audit_id")).annotate(first_due=Subquery(first_due))


def give_up_unsendable(audit: Audit | None = None) -> list[str]:
    """Record FAILED the alerts waiting to be sent again (of ``audit``'s site, or all) that ``notify`` never will send.

    They are what ``_sendable`` leaves out besides those not yet due: never listed by the sweep
    again, they would otherwise say "Not delivered yet" for ever. The first reason that holds is recorded.
    """
    waiting = Notification.objects.filter(state=Notification.State.RETRY)
    if audit is not None:
        waiting = waiting.filter(audit__site_id=audit.site_id)
    due = Audit.objects.filter(_due(), pk=OuterRef("audit_id"))
    # A resumed audit's are left waiting until it ends again: failed again, its alert goes with the new failure.
    ended = waiting.filter(audit__status__in=Audit.ENDED)
    given_up = sum(rows.give_up(why) for why, rows in (
        (SUPERSEDED, ended.exclude(event=F("audit__status"))),
        (RECOVERED, waiting.filter(Q(event=Notification.Event.FAILED) & _completed_since())),
        (TURNED_OFF, ended.exclude(Exists(due))),
        (CHANNEL_REMOVED, waiting.filter(channel=Notification.Channel.WEBHOOK, audit__site__webhook_url="")),
        (EXPIRED, waiting.filter(created_at__lt=timezone.now() - SWEEP_WINDOW)),
    ))
    return [f"gave up {given_up} alert(s) that can no longer be sent"] if given_up else []


def fail_stuck() -> list[str]:
    """Record FAILED the alerts left SENDING longer than a task may run: their task was killed mid-send.

    Not sent again: the task may have sent it before it died, and an alert goes at
    most once. django-q2 kills a task at its timeout, so an older claim has no sender left.
    """
    bound = timezone.now() - timedelta(seconds=settings.Q_CLUSTER["timeout"])
    stuck = Notification.objects.filter(state=Notification.State.SENDING, claimed_at__lt=bound)
    count = stuck.update(state=Notification.State.FAILED, detail=STUCK_DETAIL)
    return [f"recorded {count} alert(s) stuck sending as failed"] if count else []


def changes_url(audit: Audit) -> str:
    """The audit's "since previous" view, as an absolute link."""
    return settings.SITEWARD["BASE_URL"] + reverse("audit-detail", args=[audit.pk]) + "#changes"


def notify(audit_id: int) -> str:
    """Send the alerts due for ``audit_id`` that nobody has claimed; a short summary of what happened."""
    audit = Audit.objects.select_related("site", "owner").filter(pk=audit_id).first()
    if audit is None:
        return f"audit {audit_id}: no such audit"
    if audit.trigger != Audit.Trigger.SCHEDULE:
        return f"audit {audit_id}: not scheduled, no alerts"
    # Settled here too, the site's whole list, not only by the watchdog: the site page is right as soon as
    # the audit ends again, or a later run completes.
    give_up_unsendable(audit)
    if audit.status not in (Audit.Status.COMPLETED, Audit.Status.FAILED):
        return f"audit {audit_id}: {audit.status}, no alerts"
    if not Audit.objects.filter(pk=audit.pk).filter(_due()).exists():
        return f"audit {audit_id}: nothing due"
    alert = Alert(audit)
    # The webhook first: its whole exchange has one deadline, while a mail server's timeout is per socket
    # operation, so a slow one could hold the task until django-q2 kills it, the webhook unsent.
    channels = [(Notification.Channel.EMAIL, _send_email)]
    if audit.site.webhook_url:
        channels.insert(0, (Notification.Channel.WEBHOOK, _send_webhook))
    # Every channel is claimed before any is sent, so a sweep that finds rows
    # finds all of them; a crash mid-send loses an alert but never repeats one.
    # A repeat held back is claimed as such: the sweep passes it by, and the site page says why nothing went.
    state = Notification.State.HELD if alert.held_back else Notification.State.SENDING
    claimed, outcomes = [], []
    for channel, send in channels:
        row = _claim(audit, audit.status, channel, alert.reason, state, alert.held_back) or _reclaim(audit, channel)
        if row is not None and row.state == Notification.State.HELD:
            outcomes.append(f"{channel} held back")
        elif row is not None:
            claimed.append((row, send))
    for row, send in claimed:
        state, detail, undelivered = send(alert)
        outcomes.append(f"{row.channel} {_record(row, state, detail, undelivered)}")
    if not outcomes:
        return f"audit {audit_id}: already notified"
    return f"audit {audit_id}: " + ", ".join(outcomes)


def _claim(audit: Audit, event: str, channel: str, reason: str, state: str, detail: str) -> Notification | None:
    """The row for this event and channel if this call inserted it, else None (another call owns the send)."""
    # get_or_create inserts inside a savepoint and reads the winner's row on an
    # IntegrityError, so of two racing calls exactly one sees created=True.
    row, created = Notification.objects.get_or_create(
        audit=audit, event=event, channel=channel,
        defaults={"state": state, "reason": reason[:200], "detail": detail[:500]},
    )
    return row if created else None


def _reclaim(audit: Audit, channel: str) -> Notification | None:
    """The channel's alert waiting to be sent again, if its time has come and this call took it (a conditional
    UPDATE decides between two calls), else None."""
    row = Notification.objects.filter(_sendable(), audit=audit, channel=channel).first()
    if row is None:
        return None
    taken = Notification.objects.filter(pk=row.pk, state=Notification.State.RETRY, tries=row.tries).update(
        state=Notification.State.SENDING, claimed_at=timezone.now())
    return row if taken else None


def _record(row: Notification, state: str, detail: str, undelivered: bool) -> str:
    """Note a round's outcome; a failure the other end surely did not take waits for its next round."""
    tries = row.tries + 1
    if state == Notification.State.FAILED and undelivered and tries <= len(LATER_DELAYS):
        retry_at = timezone.now() + LATER_DELAYS[tries - 1]
        state, detail = Notification.State.RETRY, f"{detail}{TRIED_AGAIN}{retry_at:%Y-%m-%d %H:%M %Z}"
    else:
        retry_at = None
    Notification.objects.filter(pk=row.pk).update(state=state, detail=detail[:500], tries=tries, retry_at=retry_at)
    return state


class Alert:
    """What one audit's alert says, built once for both channels."""

    def __init__(self, audit: Audit) -> None:
        self.audit = audit
        self.site: Site = audit.site
        self.failed = audit.status == Audit.Status.FAILED
        self.url = changes_url(audit)
        self.admitted = at_or_above(self.site.notify_severity)
        counts = audit.change_counts or {}
        new = counts.get("issues", {}).get("new", {})
        self.new_by_severity = {severity: int(new.get(severity, 0)) for severity in SEVERITIES}
        self.changes = {change: 0 for change in diff.ISSUE_CHANGES} | diff.totals(audit.change_counts)
        self.new_due = sum(self.new_by_severity[severity] for severity in self.admitted)
        self.news = self._new_issues_phrase() if self.new_due else ""
        # When the site's scheduled runs began failing, and whether this one failed as the one before it.
        self.failing_since, self.repeat, self.held_back = None, False, ""
        if self.failed:
            self._weigh_failure()
        elif self.site.notify_on_failure:
            self.failing_since = audit.failing_since
        self.recovered = not self.failed and self.failing_since is not None
        if self.failed:
            self.reason = ("audit still failing: " if self.repeat else "audit failed: ") + audit.error_code
        elif self.recovered:
            since = f"recovered, failing since {self._when(self.failing_since)}"
            self.reason = f"{since}; {self.news}" if self.news else since
        else:
            self.reason = self.news

    def _weigh_failure(self) -> None:
        """Set ``failing_since``, ``repeat``, and ``held_back`` (why a repeat is not sent; "" when it is)."""
        audit = self.audit
        earlier = audit.failures_before()
        self.failing_since = earlier.aggregate(first=Min("finished_at"))["first"] or audit.finished_at
        previous = earlier.order_by("-pk").values_list("error_code", flat=True).first()
        self.repeat = previous is not None and previous == audit.error_code
        if not self.repeat:
            return
        told = earlier.filter(notifications__event=Notification.Event.FAILED,
                              notifications__state__in=Notification.TOLD).order_by("-pk").first()
        # Nobody told of this failing yet (its alerts skipped or undelivered): this run's alert is news.
        if told is None or audit.created_at >= told.created_at + REMINDER_EVERY - REMINDER_SLACK:
            return
        remind = self._when(told.created_at + REMINDER_EVERY)
        self.held_back = (f"A repeat: the previous scheduled run failed with {audit.error_code} too, and audit "
                          f"{told.pk}'s alert told of it. A reminder goes with the first run failing so from {remind}.")

    def _when(self, moment) -> str:
        return moment.astimezone(self.site.zone()).strftime("%Y-%m-%d %H:%M %Z")

    def _new_issues_phrase(self) -> str:
        present = [severity for severity in self.admitted if self.new_by_severity[severity]]
        noun = "issue" if self.new_due == 1 else "issues"
        if len(present) == 1:
            return f"{self.new_due} new {present[0]} {noun}"
        parts = ", ".join(f"{self.new_by_severity[severity]} {severity}" for severity in present)
        return f"{self.new_due} new {noun} ({parts})"

    @property
    def subject(self) -> str:
        if self.repeat:
            return f"[Siteward] Audit of {self.audit.start_url} still failing"
        if self.failed:
            return f"[Siteward] Audit of {self.audit.start_url} failed"
        if self.recovered:
            return f"[Siteward] Audit of {self.audit.start_url} recovered" + (f": {self.news}" if self.news else "")
        return f"[Siteward] {self.news} on {self.audit.start_url}"

    def payload(self) -> dict:
        audit = self.audit
        return {
            "event": "audit.failed" if self.failed else "audit.completed",
            "audit_id": audit.pk,
            "site_id": audit.site_id,
            "start_url": audit.start_url,
            "status": audit.status,
            "error_code": audit.error_code,
            "url": self.url,
            # Null when there was no earlier audit to compare with (the counts are then all 0).
            "baseline_id": audit.baseline_id,
            "changes": self.changes,
            "new_issues": self.new_by_severity,
            "issues": {"critical": audit.issues_critical, "warning": audit.issues_warning,
                       "notice": audit.issues_notice},
            # A recovery keeps the event "audit.completed", which receivers of new-issue alerts already take.
            "recovered": self.recovered,
            "failing_since": self.failing_since.astimezone(UTC).isoformat() if self.failing_since else None,
        }

    def body(self) -> str:
        audit = self.audit
        finished = self._when(audit.finished_at) if audit.finished_at else "recently"
        if self.failed:
            lines = [
                f"The scheduled audit of {audit.start_url} failed ({finished}).",
                "",
                f"Reason: {_label(Audit.ErrorCode, audit.error_code)} ({audit.error_code or 'unknown'})",
                f"Phase: {_label(Audit.Phase, audit.failed_phase)}",
            ]
            if self.failing_since and self.failing_since != audit.finished_at:
                lines.append(f"Failing since: {self._when(self.failing_since)}")
            if audit.error_detail:
                lines.append(f"Detail: {audit.error_detail[:500]}")
            lines += ["", f"Pages crawled before the failure: {audit.pages_crawled}"]
            if self.repeat:
                lines += ["", "The scheduled runs before it failed the same way: while they do, an alert goes "
                              "once a day, and the runs in between send none."]
        elif self.recovered:
            lines = [f"The scheduled audit of {audit.start_url} completed ({finished}): the site has recovered. "
                     f"Its scheduled audits had failed since {self._when(self.failing_since)}.", ""]
            if self.news:
                lines += [f"It found {self.news} since the previous completed audit.", ""]
                lines += self._issue_lines() + [""]
            lines += [f"Fixed since the previous completed audit: {self.changes['fixed']}"]
        else:
            lines = [
                f"The scheduled audit of {audit.start_url} ({finished}) found {self.news} "
                "since the previous audit.",
                "",
            ]
            lines += self._issue_lines()
            lines += ["", f"Fixed since the previous audit: {self.changes['fixed']}"]
        lines += ["", f"See what changed: {self.url}", "",
                  "-- ",
                  f"Siteward sends this because alerts are on for {self.site.start_url}; "
                  "change them in the site's settings."]
        return "\n".join(lines) + "\n"

    def _issue_lines(self) -> list[str]:
        rank = Case(*(When(severity=severity, then=Value(i)) for i, severity in enumerate(SEVERITIES)),
                    output_field=IntegerField())
        issues = list(Issue.objects.filter(audit=self.audit, change=Issue.Change.NEW,
                                           severity__in=self.admitted).exclude(review=Issue.Review.IGNORED)
                      .annotate(rank=rank).order_by("rank", "code", "url", "id")[:EMAIL_ISSUES])
        lines: list[str] = []
        current = None
        for issue in issues:
            if issue.severity != current:
                current = issue.severity
                if lines:
                    lines.append("")
                lines.append(f"New {current} issues ({self.new_by_severity[current]}):")
            title = issue.issue_type.title if issue.issue_type else issue.code
            target = f" -> {issue.target_url}" if issue.target_url else ""
            lines.append(f"  - [{issue.code}] {title}: {issue.url}{target}")
        if self.new_due > len(issues):
            lines += ["", f"... and {self.new_due - len(issues)} more."]
        return lines


def _label(choices, value: str) -> str:
    try:
        return str(choices(value).label)
    except ValueError:
        return value or "unknown"


def _send_email(alert: Alert) -> tuple[str, str, bool]:
    """(state, detail, whether a failure surely left it undelivered): so for every channel."""
    if not alert.site.notify_email:
        return Notification.State.SKIPPED, "E-mail alerts are off for this site", False
    address = alert.audit.owner.email
    if not address:
        return Notification.State.SKIPPED, "The owner has no e-mail address", False

    def mail() -> Exception | None:
        try:
            send_mail(alert.subject, alert.body(), None, [address], fail_silently=False)
        except Exception as exc:  # noqa: BLE001 - recorded on the row; an alert never fails a task
            return exc
        return None

    failure, tries = _tried(mail, again=lambda exc: exc is not None and _not_taken(exc))
    if failure is None:
        return Notification.State.SENT, address + tries, False
    log.warning("audit %s: e-mail alert failed: %s%s", alert.audit.pk, failure, tries)
    return Notification.State.FAILED, f"{type(failure).__name__}: {failure}{tries}", _not_taken(failure)


def _tried(send, *, again) -> tuple[object, str]:
    """``send()``, and again after each of RETRY_DELAYS while ``again(what it returned)``.

    What the last try returned, and " (after N tries)" when there was more than one.
    """
    attempts = 0
    for delay in (0.0, *RETRY_DELAYS):
        time.sleep(delay)
        attempts += 1
        outcome = send()
        if not again(outcome):
            break
    return outcome, f" (after {attempts} tries)" if attempts > 1 else ""


def _not_taken(exc: Exception) -> bool:
    """Whether a failed send surely left the message undelivered, and may be tried again."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return bool(exc.recipients) and all(400 <= code < 500 for code, _ in exc.recipients.values())
    if isinstance(exc, smtplib.SMTPResponseException):  # SMTPConnectError, SMTPDataError, ... with a code
        return 400 <= exc.smtp_code < 500
    return isinstance(exc, ConnectionRefusedError)


def _send_webhook(alert: Alert) -> tuple[str, str, bool]:
    # The deployment's setting only: a site's allow_private was chosen for its
    # crawl target, not for where its alerts may be posted.
    guard = AddressGuard(allow_private=settings.SITEWARD["ALLOW_PRIVATE_TARGETS"])
    payload = alert.payload()
    result, tries = _tried(
        lambda: post_json(alert.site.webhook_url, payload, guard=guard, timeout=settings.SITEWARD["WEBHOOK_TIMEOUT"],
                          secret=alert.site.webhook_secret()),
        again=lambda result: not result.ok and result.retry)
    if result.ok:
        return Notification.State.SENT, result.detail + tries, False
    log.warning("audit %s: webhook alert failed: %s%s", alert.audit.pk, result.detail, tries)
    return Notification.State.FAILED, result.detail + tries, result.retry

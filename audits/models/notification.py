"""A notification about an audit, one row per audit, event and channel: the record that it was sent once."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from .audit import Audit

# What a RETRY row's detail adds to its last error, before the time it is due again.
TRIED_AGAIN = "; tried again at "


class NotificationQuerySet(models.QuerySet):
    def give_up(self, why: str) -> int:
        """Record FAILED those of these alerts waiting to be sent again, ``why`` in place of when; how many.

        Each row is a conditional UPDATE on its state and round, so one a sender
        reclaimed meanwhile stays that sender's; the last error is kept after ``why``.
        """
        given_up = 0
        for row in self.filter(state=Notification.State.RETRY).only("pk", "tries", "detail"):
            last = row.detail.split(TRIED_AGAIN)[0]
            given_up += Notification.objects.filter(pk=row.pk, state=Notification.State.RETRY, tries=row.tries).update(
                state=Notification.State.FAILED, retry_at=None, detail=f"{why} (last try: {last})"[:500])
        return given_up


class Notification(models.Model):
    """Claimed by inserting the row (unique per audit, event and channel), then sent and its outcome noted.

    A second finalize, a second watchdog or a redelivered task finds the row and
    sends nothing; a send that fails is recorded here, never raised. The event is
    part of the claim because a failed audit can be resumed: its completion is news
    to the person its failure was sent to.
    """

    class Event(models.TextChoices):
        # The audit statuses an alert is about, spelled as they are, so a query can match the two.
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"

    class Channel(models.TextChoices):
        EMAIL = "email", "E-mail"
        WEBHOOK = "webhook", "Webhook"

    class State(models.TextChoices):
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Not sent"
        RETRY = "retry", "Not delivered yet: tried again later"
        HELD = "held", "Held back: a repeat"

    # A failure alert that told of a failure: sent, or being sent, or waiting to be sent again. One skipped
    # (a channel off), held back or never delivered told nobody, so the next failure is news and is sent.
    TOLD = (State.SENT, State.SENDING, State.RETRY)

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=10, choices=Event.choices, help_text="What the alert told of")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    state = models.CharField(max_length=8, choices=State.choices, default=State.SENDING)
    reason = models.CharField(max_length=200, blank=True, help_text="Why it was sent: new issues, or a failure")
    detail = models.CharField(max_length=500, blank=True, help_text="The outcome: an address, a status, an error")
    created_at = models.DateTimeField(auto_now_add=True)
    # Rounds of sending made (each of at most three quick tries), and when a RETRY row is due again.
    tries = models.PositiveSmallIntegerField(default=0)
    retry_at = models.DateTimeField(null=True, blank=True)
    # When its sender took it (the insert, or a later round's claim): how long it may stay SENDING.
    claimed_at = models.DateTimeField(default=timezone.now)

    objects = NotificationQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "event", "channel"], name="notification_once_per_event"),
        ]

    def __str__(self):
        return f"{self.channel} for audit {self.audit_id} {self.event}: {self.state}"

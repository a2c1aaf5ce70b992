"""A notification about an audit, one row per audit, event and channel: the record that it was sent once."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from .audit import Audit


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

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "event", "channel"], name="notification_once_per_event"),
        ]

    def __str__(self):
        return f"{self.channel} for audit {self.audit_id} {self.event}: {self.state}"

"""What changed since the previous audit of a site, written once at finalize (``audits.diff``).

An audit's own issues carry their change (new or persisting) in ``Issue.change``;
the previous audit's issues this one did not report, and the pages that were
added, removed or changed, are rows here, copied so they outlive the audit they
came from.
"""

from __future__ import annotations

from django.db import models

from .audit import Audit, Severity


class IssueCopy(models.Model):
    """An issue of another audit as it was, copied so it outlives that audit: its key and its own words."""

    key = models.CharField(max_length=32)
    url = models.TextField()
    code = models.CharField(max_length=40)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    message = models.TextField()
    target_url = models.TextField(blank=True)

    class Meta:
        abstract = True


class GoneIssue(IssueCopy):
    """An issue of the baseline audit that this audit did not report.

    Fixed when the URL it was on was crawled this time; unknown when it was not
    (out of the limits, or no longer linked), since then nothing says it is gone.
    """

    class Change(models.TextChoices):
        FIXED = "fixed", "Fixed"
        UNKNOWN = "unknown", "Unknown (its page was not crawled this time)"

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="gone_issues", db_index=False)
    change = models.CharField(max_length=8, choices=Change.choices)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "key"], name="goneissue_unique_key_per_audit"),
        ]
        indexes = [models.Index(fields=["audit", "change", "severity"], name="goneissue_audit_change")]

    def __str__(self):
        return f"{self.change}: {self.code} on {self.url}"


class RecheckedIssue(IssueCopy):
    """An issue of the audit a validation re-checked, with the validation's verdict on it (``audits.validation``).

    Copied at the validation's finalize, in the re-checked audit's words, so its checklist stays what it
    judged whatever becomes of that audit (deleted, its issues marked since).
    """

    class Result(models.TextChoices):
        STILL = "still", "Still there"
        UNKNOWN = "unknown", "Unknown"
        FIXED = "fixed", "Fixed"

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="rechecked_issues", db_index=False)
    result = models.CharField(max_length=8, choices=Result.choices)
    url_hash = models.CharField(max_length=32)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "key"], name="recheckedissue_unique_key_per_audit"),
        ]

    def __str__(self):
        return f"{self.result}: {self.code} on {self.url}"


class PageChange(models.Model):
    """A crawled URL that appeared, disappeared or changed between the baseline and this audit.

    Removed means the URL was a page last time and this audit neither crawled
    it nor found a link to it (a URL found but left uncrawled by the limits is
    not called removed).
    """

    class Change(models.TextChoices):
        ADDED = "added", "Added"
        REMOVED = "removed", "Removed"
        CHANGED = "changed", "Changed"

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="page_changes", db_index=False)
    change = models.CharField(max_length=8, choices=Change.choices)
    url_hash = models.CharField(max_length=32)
    url = models.TextField()
    status_before = models.PositiveSmallIntegerField(null=True, blank=True)
    status_after = models.PositiveSmallIntegerField(null=True, blank=True)
    title_before = models.CharField(max_length=1000, blank=True)
    title_after = models.CharField(max_length=1000, blank=True)
    canonical_before = models.TextField(blank=True)
    canonical_after = models.TextField(blank=True)
    indexable_before = models.BooleanField(null=True)
    indexable_after = models.BooleanField(null=True)
    content_changed = models.BooleanField(default=False)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "url_hash"], name="pagechange_unique_url_per_audit"),
        ]
        indexes = [models.Index(fields=["audit", "change"], name="pagechange_audit_change")]

    def __str__(self):
        return f"{self.change}: {self.url}"

    def what_changed(self) -> list[str]:
        """The differences, in words, for a changed page."""
        if self.change != self.Change.CHANGED:
            return []
        found = []
        if self.status_before != self.status_after:
            found.append(f"status {self.status_before or '—'} → {self.status_after or '—'}")
        if self.title_before != self.title_after:
            found.append("title")
        if self.canonical_before != self.canonical_after:
            found.append("canonical")
        if self.indexable_before != self.indexable_after:
            found.append("now indexable" if self.indexable_after else "now not indexable")
        if self.content_changed:
            found.append("content")
        return found

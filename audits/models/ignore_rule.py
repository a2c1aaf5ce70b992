"""Ignore rules: "ignore this issue type on URLs matching this pattern", kept per site.

A rule marks matching open issues ignored in the audit it was made from at once
(``apply_to``) and in every later audit of the site when its issues are final
(``audits.diff.carry_triage``, right after review decisions are carried forward:
at finalize, or once a failed or cancelled audit's chunks have stopped).
Patterns are RE2, searched unanchored in the URL of the page the issue is on:
the same engine and reading as the crawl's include and exclude patterns.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from crawler.urls import compile_patterns

from .audit import Audit
from .results import Issue, IssueCode
from .site import Site

# Matching issues are marked this many at a time: a rule over 100,000 issues
# never holds more than one batch of ids in memory.
BATCH = 1000


class IgnoreRuleQuerySet(models.QuerySet):
    def apply_to(self, audit: Audit) -> int:
        """Mark ``audit``'s open issues that any of these rules match ignored; returns how many changed.

        Only open issues change: a person's "reviewed" stays what they chose.
        """
        return sum(rule.apply_to(audit) for rule in self.filter(site_id=audit.site_id))


class IgnoreRule(models.Model):
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="ignore_rules")
    code = models.CharField(max_length=40, choices=IssueCode.choices, verbose_name="issue type")
    pattern = models.CharField(max_length=500, blank=True,
                               help_text="RE2 regular expression searched in the page's URL; empty for every URL")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = IgnoreRuleQuerySet.as_manager()

    class Meta:
        ordering = ["code", "pattern", "id"]
        constraints = [
            models.UniqueConstraint(fields=["site", "code", "pattern"], name="ignorerule_unique_per_site"),
        ]

    def __str__(self):
        return f"ignore {self.code} on {self.pattern or 'every URL'}"

    def apply_to(self, audit: Audit) -> int:
        """Mark ``audit``'s open issues of this type on matching URLs ignored; returns how many changed.
        One a person reopened stays open."""
        issues = Issue.objects.filter(audit=audit, code=self.code, review=Issue.Review.OPEN, reopened=False)
        if not self.pattern:
            return issues.update(review=Issue.Review.IGNORED)
        (regex,) = compile_patterns([self.pattern])
        # RE2 runs in Python (neither database has it), so the issues are read in
        # id order a batch at a time over the (audit, code) index, and each
        # batch's matches updated before the next is read.
        changed, last = 0, 0
        while batch := list(issues.filter(id__gt=last).order_by("id").values_list("id", "url")[:BATCH]):
            last = batch[-1][0]
            ids = [pk for pk, url in batch if regex.search(url)]
            if ids:
                changed += Issue.objects.filter(id__in=ids, review=Issue.Review.OPEN, reopened=False).update(
                    review=Issue.Review.IGNORED)
        return changed

    def apply_now(self, also: Audit | None = None) -> dict[int, int]:
        """Apply the rule to the audits a person sees now, each rescored; {audit id: issues ignored}.

        Those are the site's latest audit, the latest complete one (the site's
        list and trend show it when the latest is a validation or still running)
        and ``also``, the audit the rule was made on. Later audits apply it as they end.
        """
        latest = Audit.objects.filter(site_id=self.site_id).order_by("-pk").first()
        shown = Audit.comparable().filter(site_id=self.site_id).order_by("-pk").first()
        changed = {}
        for audit in {a.pk: a for a in (also, latest, shown) if a is not None}.values():
            if changed.setdefault(audit.pk, self.apply_to(audit)):
                audit.rescore()
        return changed

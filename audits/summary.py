"""An audit's issue totals: by severity and by type, for its page and its reports.

Ignored issues are left out of every total and counted on their own: a person
dismissed them. Reviewed issues still count: they are acknowledged, not gone.
"""

from __future__ import annotations

from django.db.models import Count, Q

from crawler.catalogue import CATALOGUE

from .models import Audit, Issue, Severity

SEVERITY_ORDER = [Severity.CRITICAL, Severity.WARNING, Severity.NOTICE]
IGNORED = Q(review=Issue.Review.IGNORED)


def issue_summary(audit: Audit) -> dict:
    """Issues by severity and by code without the ignored ones, and how many are ignored.

    One GROUP BY over the (audit, severity, code) index; a type whose issues are
    all ignored drops out of ``codes``.
    """
    counts = (
        Issue.objects.filter(audit=audit).values("severity", "code")
        .annotate(n=Count("id", filter=~IGNORED), ignored=Count("id", filter=IGNORED)).order_by()
    )
    by_severity = {sev.value: 0 for sev in SEVERITY_ORDER}
    codes, ignored = [], 0
    for row in counts:
        ignored += row["ignored"]
        if not row["n"]:
            continue
        by_severity[row["severity"]] = by_severity.get(row["severity"], 0) + row["n"]
        codes.append({"code": row["code"], "severity": row["severity"], "count": row["n"],
                      "type": CATALOGUE.get(row["code"])})
    rank = {sev.value: i for i, sev in enumerate(SEVERITY_ORDER)}
    codes.sort(key=lambda c: (rank.get(c["severity"], 9), -c["count"], c["code"]))
    return {"by_severity": by_severity, "codes": codes, "total": sum(by_severity.values()), "ignored": ignored}


def severity_counts(audit: Audit, *, include_ignored: bool = False) -> dict:
    """{severity: n} for every severity, ignored issues left out unless ``include_ignored``."""
    issues = Issue.objects.filter(audit=audit)
    if not include_ignored:
        issues = issues.exclude(IGNORED)
    counts = {sev.value: 0 for sev in SEVERITY_ORDER}
    counts.update(issues.values_list("severity").annotate(n=Count("id")).order_by())
    return counts

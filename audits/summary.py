"""An audit's issue totals: by severity and by type, for its page and its reports."""

from __future__ import annotations

from django.db.models import Count

from crawler.catalogue import CATALOGUE

from .models import Audit, Issue, Severity

SEVERITY_ORDER = [Severity.CRITICAL, Severity.WARNING, Severity.NOTICE]


def issue_summary(audit: Audit) -> dict:
    """Issues by severity and by code, from one GROUP BY over the (audit, severity, code) index."""
    counts = (
        Issue.objects.filter(audit=audit).values("severity", "code").annotate(n=Count("id")).order_by()
    )
    by_severity = {sev.value: 0 for sev in SEVERITY_ORDER}
    codes = []
    for row in counts:
        by_severity[row["severity"]] = by_severity.get(row["severity"], 0) + row["n"]
        codes.append({"code": row["code"], "severity": row["severity"], "count": row["n"],
                      "type": CATALOGUE.get(row["code"])})
    rank = {sev.value: i for i, sev in enumerate(SEVERITY_ORDER)}
    codes.sort(key=lambda c: (rank.get(c["severity"], 9), -c["count"], c["code"]))
    return {"by_severity": by_severity, "codes": codes, "total": sum(by_severity.values())}

"""The single-file HTML report of an audit: something to send to whoever fixes the site.

One file with everything inline (its stylesheet, print rules included; no
script, image, font or stylesheet fetched from anywhere), so it opens the same
from a mail attachment, offline, or printed. Its size is bounded whatever the
audit's: totals by type with a few example URLs each, and the most-linked
broken targets, with how many more the CSVs hold.
"""

from __future__ import annotations

from django.db import connection
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone

from . import broken, score
from .models import Audit, Issue
from .summary import issue_summary

# Broken targets listed, most linked first, and sources named for each.
TOP_TARGETS = 500
TARGET_SOURCES = 3
# Example URLs listed under each issue type.
EXAMPLES = 5

# The first EXAMPLES issues of each code, in the order they were found, the
# ignored ones left out as from the totals (audits.summary): one numbered pass
# over the audit's issues instead of a query per type.
EXAMPLES_SQL = """
    SELECT code, severity, url, target_url, message FROM (
        SELECT code, severity, url, target_url, message,
               ROW_NUMBER() OVER (PARTITION BY code, severity ORDER BY id) AS n
        FROM audits_issue WHERE audit_id = %s AND review <> %s
    ) AS numbered
    WHERE n <= %s
    ORDER BY code, severity, n
"""


def examples(audit: Audit, limit: int = EXAMPLES) -> dict[tuple[str, str], list[dict]]:
    """Up to ``limit`` examples of each (code, severity): a code such as noindex is a warning on one page and
    critical on another, and the summary counts them apart."""
    found: dict[tuple[str, str], list[dict]] = {}
    with connection.cursor() as cursor:
        cursor.execute(EXAMPLES_SQL, [audit.pk, Issue.Review.IGNORED.value, limit])
        for code, severity, url, target, message in cursor.fetchall():
            found.setdefault((code, severity), []).append({"url": url, "target_url": target, "message": message})
    return found


def report_context(audit: Audit) -> dict:
    summary = issue_summary(audit)
    found = examples(audit)
    totals = broken.totals(audit)
    targets = broken.targets(audit).order_by(*broken.TARGET_SORTS["-sources"])[:TOP_TARGETS]
    rows = broken.describe(audit, targets, preview=TARGET_SOURCES)
    dead = totals["internal"] + totals["external"]
    return {
        "audit": audit,
        "summary": summary,
        "types": [{**entry, "examples": found.get((entry["code"], entry["severity"]), [])} for entry in summary["codes"]],
        "broken": rows,
        "broken_totals": totals,
        "broken_total": dead,
        "broken_more": max(dead - len(rows), 0),
        # The health score as the audit page shows it: stored on the audit once
        # it has completed (audits.score), None before, which leaves it out.
        "score": audit.score,
        "score_formula": score.FORMULA,
        "score_parts": score.breakdown(audit) if audit.score is not None else None,
        "generated_at": timezone.now(),
    }


def report_response(audit: Audit) -> HttpResponse:
    html = render_to_string("audits/report.html", report_context(audit))
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    # A download, not a page of the dashboard: it is meant to be saved and sent.
    response["Content-Disposition"] = f'attachment; filename="audit-{audit.pk}-report.html"'
    response["Cache-Control"] = "private, no-store"
    return response

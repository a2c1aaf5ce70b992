"""The health score: one number from 0 to 100 that says how much of a site is free of real problems.

    score = round(100 × (1 − (critical pages + 0.5 × warning pages) / pages)), halves up

- *pages*: the audit's HTML pages that answered: kind "page", fetched without
  error, a 2xx status, not a redirect (a redirecting URL's target is counted as
  its own page). Nothing else has content to be healthy or not.
- *critical pages*: those pages with at least one critical issue that is not ignored.
- *warning pages*: the others with at least one warning that is not ignored.

Notices do not lower the score, and neither do issues without a page of their
own (robots.txt, the sitemap). Ignored issues are left out; reviewed ones still
count (acknowledged is not fixed). Fixing a page, or ignoring its issues, never
lowers the score. Without pages there is no score.

Counted in SQL with COUNT(DISTINCT page_id), so it costs two aggregate queries
whatever the audit's size.
"""

from __future__ import annotations

import math

from django.db.models import Count, Q

from .models import Audit, Issue, Page, Severity

# The same formula in words, for the audit page (kept beside the code it describes).
FORMULA = ("100 × (1 − (pages with a critical issue + ½ × pages with a warning but no critical issue) "
           "÷ pages that answered 2xx), rounded half up. Notices and ignored issues do not count; reviewed ones do.")
WARNING_WEIGHT = 0.5


def healthy_pages(audit: Audit):
    """The pages the score is the share of: HTML pages that answered 2xx without redirecting."""
    return Page.objects.filter(audit=audit, kind=Page.Kind.PAGE, fetch_error="", status_code__gte=200,
                               status_code__lt=300, redirect_count=0)


def breakdown(audit: Audit) -> dict:
    """{"pages": n, "critical": pages with a critical issue, "warning": pages with only warnings}."""
    pages = healthy_pages(audit).count()
    scored = Issue.objects.filter(audit=audit, page__in=healthy_pages(audit)).exclude(review=Issue.Review.IGNORED)
    counts = scored.aggregate(
        critical=Count("page_id", distinct=True, filter=Q(severity=Severity.CRITICAL)),
        serious=Count("page_id", distinct=True, filter=Q(severity__in=[Severity.CRITICAL, Severity.WARNING])),
    )
    return {"pages": pages, "critical": counts["critical"], "warning": counts["serious"] - counts["critical"]}


def compute(audit: Audit) -> int | None:
    """The score of ``audit`` from its rows now; None when it has no page that answered."""
    parts = breakdown(audit)
    if not parts["pages"]:
        return None
    penalty = (parts["critical"] + WARNING_WEIGHT * parts["warning"]) / parts["pages"]
    return max(0, min(100, math.floor(100 * (1 - penalty) + 0.5)))

"""What changed between audits of a site: the compare view and changes.csv.

The diff an audit recorded at finalize (against its baseline) is read from its
rows; any other pair of the site's audits is compared live by the same SQL
(``audits.diff``), a screenful at a time.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django_htmx.http import HttpResponseClientRedirect

from crawler.catalogue import CATALOGUE

from . import diff, exports
from .models import SEVERITY_RANK, Audit, GoneIssue, Issue, PageChange
from .tables import MAX_PAGE_NUMBER, PER_PAGE, Window, audit_view, wants_partial, window

SHOWS = diff.ISSUE_CHANGES + diff.PAGE_CHANGES


def _number(request) -> int:
    try:
        number = int(request.GET.get("page", 1))
    except (TypeError, ValueError):
        number = 1
    return min(max(number, 1), MAX_PAGE_NUMBER)


def _listed(fetch, request) -> Window:
    """A Window over a list-returning diff function (LIMIT one more than shown, as ``views.window``).

    A page past the end (a bookmark on a list that shrank) shows the first: the list is not counted.
    """
    number = _number(request)
    rows = fetch(limit=PER_PAGE + 1, offset=(number - 1) * PER_PAGE)
    if not rows and number > 1:
        number, rows = 1, fetch(limit=PER_PAGE + 1, offset=0)
    return Window(rows[:PER_PAGE], number, len(rows) > PER_PAGE, PER_PAGE)


def _issue_rows(issues) -> list[dict]:
    return [{"issue": issue, "type": CATALOGUE.get(issue.code)} for issue in issues]


def _not_comparable(*audits: Audit) -> str:
    """Why these audits cannot be compared now ("" if they can): each must have ended and be staying.

    A running audit's pages and issues change under the comparison, and one being
    deleted loses its rows batch by batch; failed and cancelled ones are stable and
    compare as what they crawled (the page names their status).
    """
    for audit in audits:
        if audit.deleting:
            return f"Audit {audit.pk} is being deleted, so it can no longer be compared."
        if audit.is_active:
            return (f"Audit {audit.pk} is still running, and its pages and issues change until it ends: "
                    "compare it once it has finished.")
    return ""


@audit_view("GET")
def audit_compare(request, audit, other_id):
    """Two audits of the same site: the older is the baseline, whichever order the URL gives."""
    other = get_object_or_404(Audit, pk=other_id, owner=request.user)
    if other.site_id != audit.site_id:
        raise Http404("Only audits of the same site can be compared.")
    if other.pk == audit.pk:
        raise Http404("An audit compared with itself has no changes.")
    if refusal := _not_comparable(audit, other):
        # Said on the page of the audit asked about (never one being deleted: audit_view refuses those).
        messages.error(request, refusal)
        back = audit.get_absolute_url()
        return HttpResponseClientRedirect(back) if request.htmx else redirect(back)
    newer, base = (audit, other) if audit.pk > other.pk else (other, audit)
    stored = newer.baseline_id == base.pk and newer.change_counts is not None
    show = request.GET.get("show", "new")
    if show not in SHOWS:
        show = "new"
    partial = wants_partial(request)
    context = {"audit": newer, "base": base, "site": newer.site, "show": show, "stored": stored}
    if not partial:
        # The counts are the whole page's (compare.html); a tab or page click swaps
        # the table alone, and live counts are several full queries over both audits.
        counts = newer.change_counts if stored else diff.live_counts(newer, base)
        context.update(counts=counts, totals=diff.totals(counts))
    if show in ("new", "persisting"):
        # The stored counts leave ignored issues out (diff.stored_counts), so the
        # stored list does too; the live counts and list both keep them.
        issues = (Issue.objects.filter(audit=newer, change=show).exclude(review=Issue.Review.IGNORED) if stored
                  else (diff.new_issues if show == "new" else diff.persisting_issues)(newer, base))
        page = window(issues.order_by("severity_rank", "code", "id"), request)
        context.update(page_obj=page, rows=_issue_rows(page.object_list), table="issues")
    elif show in ("fixed", "unknown"):
        if stored:
            gone = GoneIssue.objects.filter(audit=newer, change=show).annotate(severity_rank=SEVERITY_RANK)
            page = window(gone.order_by("severity_rank", "code", "id"), request)
        else:
            page = _listed(lambda **kw: [GoneIssue(**row) for row in diff.gone_issues(newer, base, show, **kw)],
                           request)
        context.update(page_obj=page, rows=_issue_rows(page.object_list), table="gone")
    else:
        if stored:
            page = window(PageChange.objects.filter(audit=newer, change=show).order_by("url", "id"), request)
        else:
            page = _listed(lambda **kw: diff.page_changes(newer, base, show, **kw), request)
        context.update(page_obj=page, table="pages")
    if partial:
        return render(request, "audits/_compare_table.html", context)
    return render(request, "audits/compare.html", context)


@audit_view("GET")
def export_changes(request, audit):
    return exports.csv_response(f"audit-{audit.pk}-changes.csv", exports.CHANGE_COLUMNS, exports.change_rows(audit))

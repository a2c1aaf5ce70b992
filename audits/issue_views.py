"""The issues table of an audit: filters, sorting and the issues the run-to-run diff found gone."""

from __future__ import annotations

from django.db.models import Case, IntegerField, Q, Value, When
from django.shortcuts import render

from crawler.catalogue import CATALOGUE
from crawler.urls import url_hash

from .models import GoneIssue, Issue, IssueCode, Page, Severity
from .tables import audit_view, sort_choice, window

SEVERITY_RANK = Case(
    When(severity=Severity.CRITICAL, then=Value(0)),
    When(severity=Severity.WARNING, then=Value(1)),
    default=Value(2), output_field=IntegerField(),
)

ISSUE_SORTS = {
    "severity": ["severity_rank", "code", "id"],
    "-severity": ["-severity_rank", "code", "id"],
    "code": ["code", "id"],
    "-code": ["-code", "-id"],
    "url": ["url", "id"],
    "-url": ["-url", "-id"],
    "review": ["review", "id"],
    "-review": ["-review", "-id"],
    "found": ["id"],
    "-found": ["-id"],
}


@audit_view("GET")
def issue_list(request, audit):
    filters = {
        "severity": request.GET.get("severity", ""),
        "code": request.GET.get("code", ""),
        "q": request.GET.get("q", "").strip()[:500],
        "review": request.GET.get("review", ""),
        "change": request.GET.get("change", ""),
    }
    # Fixed and unknown issues are the baseline's, kept as GoneIssue rows: no
    # page of this audit, no review of their own.
    gone = filters["change"] in GoneIssue.Change.values
    if gone:
        issues = GoneIssue.objects.filter(audit=audit, change=filters["change"])
    else:
        issues = Issue.objects.filter(audit=audit)
        if filters["change"] in (Issue.Change.NEW, Issue.Change.PERSISTING):
            issues = issues.filter(change=filters["change"])
    if filters["severity"] in Severity.values:
        issues = issues.filter(severity=filters["severity"])
    if filters["code"] in IssueCode.values:
        issues = issues.filter(code=filters["code"])
    if filters["review"] in Issue.Review.values and not gone:
        issues = issues.filter(review=filters["review"])
    if filters["q"]:
        issues = issues.filter(Q(url__icontains=filters["q"]) | Q(target_url__icontains=filters["q"]))
    sort, order = sort_choice(request, ISSUE_SORTS, "severity")
    if gone and sort.lstrip("-") == "review":
        sort, order = "severity", ISSUE_SORTS["severity"]
    if "severity_rank" in order[0]:
        issues = issues.annotate(severity_rank=SEVERITY_RANK)
    issues = issues.order_by(*order)
    if not gone:
        issues = issues.only(
            "id", "audit_id", "page_id", "url", "code", "severity", "message", "target_url", "review", "change"
        )
    page = window(issues, request)
    # Link targets that were crawled get a link to their page view: one indexed
    # lookup for the whole screen instead of one per row.
    targets = {url_hash(i.target_url) for i in page.object_list if i.target_url}
    target_pages = dict(
        Page.objects.filter(audit=audit, url_hash__in=list(targets)).values_list("url_hash", "id")
    ) if targets else {}
    rows = [
        {"issue": i, "type": CATALOGUE.get(i.code),
         "target_page_id": target_pages.get(url_hash(i.target_url)) if i.target_url else None}
        for i in page.object_list
    ]
    context = {
        "audit": audit, "page_obj": page, "rows": rows, "filters": filters, "sort": sort,
        "severities": Severity.choices, "codes": sorted(IssueCode.choices),
        "reviews": Issue.Review.choices, "changes": CHANGE_FILTERS if audit.change_counts is not None else [],
        "gone": gone,
    }
    if request.htmx:
        return render(request, "audits/_issue_table.html", context)
    return render(request, "audits/issue_list.html", context)


CHANGE_FILTERS = [("new", "New"), ("persisting", "Persisting"), ("fixed", "Fixed"),
                  ("unknown", "Unknown (page not crawled this time)")]

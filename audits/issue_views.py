"""The issues table of an audit: filters, sorting, triage, and the issues the run-to-run diff found gone.

The filters are read in one place (``issue_filters``, ``filtered_issues``) for
the table and for triage, so "mark all matching" marks exactly what the table
lists under the same query string.
"""

from __future__ import annotations

import copy
import re
from urllib.parse import urlsplit

from django.db.models import Q
from django.shortcuts import render
from django.urls import reverse

from crawler.catalogue import CATALOGUE
from crawler.urls import compile_patterns, url_hash

from .forms import IgnoreRuleForm
from .models import (
    SEVERITY_RANK,
    SEVERITY_RANKS,
    Audit,
    GoneIssue,
    Issue,
    IssueCode,
    Page,
    Severity,
)
from .sections import clean_section, under_section
from .tables import audit_view, query_text, sort_choice, wants_partial, window

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

# "active" is every issue but the ignored: what the audit page's counts count,
# so each count there links to a list of the same length.
ACTIVE = "active"
REVIEW_FILTERS = [(ACTIVE, "Not ignored"), *Issue.Review.choices]

CHANGE_FILTERS = [("new", "New"), ("persisting", "Persisting"), ("fixed", "Fixed"),
                  ("unknown", "Unknown (page not crawled this time)")]


def issue_filters(query) -> dict:
    """The table's filters from a query string, as given (values that are not choices select nothing)."""
    return {
        "severity": query.get("severity", ""),
        "code": query.get("code", ""),
        "q": query_text(query, "q"),
        "review": query.get("review", ""),
        "change": query.get("change", ""),
        "section": clean_section(query_text(query, "section")),
    }


def filtered_issues(audit: Audit, filters: dict):
    """(queryset, gone): the issues ``filters`` select, unsorted.

    Fixed and unknown issues are the baseline's, kept as GoneIssue rows (gone
    is True): no page of this audit, no review of their own.
    """
    gone = filters["change"] in GoneIssue.Change.values
    if gone:
        issues = GoneIssue.objects.filter(audit=audit, change=filters["change"])
    else:
        issues = Issue.objects.filter(audit=audit)
        if filters["change"] in (Issue.Change.NEW, Issue.Change.PERSISTING):
            issues = issues.filter(change=filters["change"])
    if filters["severity"] in Severity.values:
        # An issue by its stored rank, the same choice: the index of the table's order then
        # serves the filter too (issue_audit_rank).
        issues = (issues.filter(severity=filters["severity"]) if gone
                  else issues.filter(severity_rank=SEVERITY_RANKS[filters["severity"]]))
    if filters["code"] in IssueCode.values:
        issues = issues.filter(code=filters["code"])
    if filters["review"] == ACTIVE and not gone:
        issues = issues.exclude(review=Issue.Review.IGNORED)
    elif filters["review"] in Issue.Review.values and not gone:
        issues = issues.filter(review=filters["review"])
    if filters["q"]:
        issues = issues.filter(Q(url__icontains=filters["q"]) | Q(target_url__icontains=filters["q"]))
    issues = under_section(issues, audit, filters["section"])
    return issues, gone


def codes_present(audit: Audit, selected: str = "", *, gone: bool = True) -> list[tuple[str, str]]:
    """The issue types this audit has (and, with ``gone``, its gone issues had), by title: the type filter's choices.

    One DISTINCT over the (audit, code) index; the selected type stays offered
    even when none is left, so the filter shows what it is set to.
    """
    codes = set(Issue.objects.filter(audit=audit).order_by().values_list("code", flat=True).distinct())
    if gone and audit.change_counts is not None:
        codes |= set(GoneIssue.objects.filter(audit=audit).order_by().values_list("code", flat=True).distinct())
    if selected in IssueCode.values:
        codes.add(selected)
    labels = dict(IssueCode.choices)
    return sorted(((code, labels.get(code, code)) for code in codes), key=lambda choice: (choice[1], choice[0]))


def suggested_pattern(url: str) -> str:
    """An ignore pattern for "URLs like this one": the URL's folder, escaped and anchored."""
    parts = urlsplit(url)
    folder = parts.path.rsplit("/", 1)[0] + "/" if "/" in parts.path else "/"
    pattern = "^" + re.escape(f"{parts.scheme}://{parts.netloc}{folder}")
    try:
        compile_patterns([pattern])
    except ValueError:
        return ""
    return pattern


def _ignore_query(kept, issue) -> str:
    """The list's query string with the rule form filled in for ``issue``'s type and folder."""
    query = kept.copy()
    query["rule_code"], query["rule_pattern"] = issue.code, suggested_pattern(issue.url)
    return query.urlencode()


def table_context(request, audit: Audit, query) -> dict:
    """Everything the table partial shows for the filters, sort and page in ``query``."""
    filters = issue_filters(query)
    issues, gone = filtered_issues(audit, filters)
    sort, order = sort_choice(request, ISSUE_SORTS, "severity")
    if gone and sort.lstrip("-") == "review":
        sort, order = "severity", ISSUE_SORTS["severity"]
    if gone and "severity_rank" in order[0]:
        issues = issues.annotate(severity_rank=SEVERITY_RANK)  # an issue's own column (Issue.severity_rank)
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
    kept = query.copy()
    for name in ("rule_code", "rule_pattern"):
        kept.pop(name, None)
    rows = [
        {"issue": i, "type": CATALOGUE.get(i.code),
         "target_page_id": target_pages.get(url_hash(i.target_url)) if i.target_url else None,
         "ignore_query": None if gone else _ignore_query(kept, i)}
        for i in page.object_list
    ]
    return {
        "audit": audit, "page_obj": page, "rows": rows, "filters": filters, "sort": sort,
        "changes": CHANGE_FILTERS if audit.change_counts is not None else [],
        "gone": gone, "query": kept.urlencode(),
        # A list that mixes ignored issues in (review "Any"): "all matching" marks all but those
        # (triage_views.issue_review), and its label says so.
        "all_leaves_ignored": filters["review"] not in (ACTIVE, *Issue.Review.values),
        "marks": [(Issue.Review.REVIEWED, "Mark reviewed"), (Issue.Review.IGNORED, "Ignore"),
                  (Issue.Review.OPEN, "Open again")],
    }


def as_list(request, audit: Audit):
    """``request`` as the list's own: a table rendered by a triage POST builds its sort
    and page links from the request's path (``sort_link``, ``page_href``), which must be the list's."""
    list_request = copy.copy(request)
    list_request.path = reverse("issue-list", args=[audit.pk])
    return list_request


def list_page(request, audit: Audit, *, rule_form: IgnoreRuleForm | None = None, status: int = 200):
    """The whole issues page for the filters in the query string, with the rule form (bound when it failed)."""
    context = table_context(request, audit, request.GET)
    codes = codes_present(audit, context["filters"]["code"])
    if rule_form is None:
        # "Ignore this type on URLs like this": a row's link fills the rule form in.
        rule_form = IgnoreRuleForm(codes=codes, initial={
            "code": request.GET.get("rule_code") or context["filters"]["code"],
            "pattern": request.GET.get("rule_pattern", "")[:500]})
    context.update({
        "severities": Severity.choices, "codes": codes, "reviews": REVIEW_FILTERS,
        "rule_form": rule_form, "rule_open": "rule_code" in request.GET or rule_form.is_bound,
        "request": as_list(request, audit),
    })
    return render(request, "audits/issue_list.html", context, status=status)


@audit_view("GET")
def issue_list(request, audit):
    if wants_partial(request):
        return render(request, "audits/_issue_table.html", table_context(request, audit, request.GET))
    return list_page(request, audit)

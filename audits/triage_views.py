"""Triage on the issues table: mark issues reviewed, ignored or open again, and add ignore rules.

Both answer POST only (the CSRF middleware checks the token: the form's field,
or the X-CSRFToken header base.html gives every htmx request) and only to the
audit's owner (``audit_view``: 404 for anyone else). The table's filters come in
the query string, exactly as the table was requested, and are read by the
table's own code (``issue_views``): "all matching" is re-selected on the
server, and chosen ids count only if they are issues of this audit.
"""

from __future__ import annotations

import copy

from django.contrib import messages
from django.http import HttpResponseBadRequest, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse

from .forms import IgnoreRuleForm
from .issue_views import (
    as_list,
    codes_present,
    filtered_issues,
    issue_filters,
    list_page,
    table_context,
)
from .models import IgnoreRule, Issue
from .tables import audit_view

# Ids beyond this in one request are refused: a page shows 50 rows, and "all
# matching" needs no ids at all.
MAX_CHOSEN = 1000

# The largest primary key a (64-bit) id column holds.
MAX_ID = 2**63 - 1

MARKED = {Issue.Review.REVIEWED: "reviewed", Issue.Review.IGNORED: "ignored", Issue.Review.OPEN: "open again"}


def _back_to_list(audit, query) -> str:
    """The issues table under the same filters, sort and page (the rule form's fill-in dropped)."""
    query = query.copy()
    for name in ("rule_code", "rule_pattern"):
        query.pop(name, None)
    url = reverse("issue-list", args=[audit.pk])
    return f"{url}?{query.urlencode()}" if query else url


def _table(request, audit, result: str):
    """The refreshed table partial for htmx, its sort and page links pointing at the list (as_list)."""
    context = table_context(request, audit, request.GET)
    context.update(request=as_list(request, audit), triage_result=result)
    return render(request, "audits/_issue_table.html", context)


@audit_view("POST")
def issue_review(request, audit):
    mark = request.POST.get("mark", "")
    if mark not in MARKED:
        return HttpResponseBadRequest("Choose reviewed, ignored or open.")
    if request.POST.get("all") == "1":
        filters = issue_filters(request.GET)
        issues, gone = filtered_issues(audit, filters)
        if gone:
            return HttpResponseBadRequest("Fixed and unknown issues belong to the earlier audit: no review here.")
        # "All matching" leaves ignored issues alone unless the filter asks for them: under "Any" it
        # would turn every ignore into reviewed, or reopen them past the site's rules for good.
        if filters["review"] != Issue.Review.IGNORED:
            issues = issues.exclude(review=Issue.Review.IGNORED)
    else:
        try:
            chosen = [int(value) for value in request.POST.getlist("issue")[:MAX_CHOSEN + 1]]
        except ValueError:
            return HttpResponseBadRequest("Not an issue id.")
        if len(chosen) > MAX_CHOSEN:
            return HttpResponseBadRequest(f"At most {MAX_CHOSEN} issues at once; use “all matching”.")
        if not chosen:
            return _answer(request, audit, "Nothing chosen: tick the issues to mark, or all issues matching "
                                           "this filter.", changed=False)
        # Ids of another audit's issues select nothing: set_review narrows to this audit.
        # Ids no row can have select nothing too; past 64 bits the database driver would raise.
        issues = Issue.objects.filter(pk__in=[pk for pk in chosen if 0 < pk <= MAX_ID])
    changed = audit.set_review(issues, mark)
    result = (f"Marked {changed} issue{'s' if changed != 1 else ''} {MARKED[mark]}." if changed
              else "Nothing changed: no chosen issue that was not already marked so.")
    return _answer(request, audit, result, changed=bool(changed))


def _answer(request, audit, result: str, *, changed: bool):
    """The table with ``result`` above it (htmx), or the list again with it as a message."""
    if request.htmx:
        return _table(request, audit, result)
    (messages.success if changed else messages.info)(request, result)
    return redirect(_back_to_list(audit, request.GET))


@audit_view("POST")
def issue_ignore_rule(request, audit):
    """A site rule made from the issues table: it applies to this audit now and to every later one."""
    rule = IgnoreRule(site_id=audit.site_id, created_by=request.user)
    form = IgnoreRuleForm(request.POST, instance=rule, codes=codes_present(audit))
    # The table's current query: the action's is the page's first one, older
    # than any filter htmx applied since.
    if "list_query" in request.POST:
        request = copy.copy(request)
        request.GET = QueryDict(request.POST["list_query"])
    if not form.is_valid() or (rule := form.save_new()) is None:
        return list_page(request, audit, rule_form=form, status=400)
    applied = rule.apply_now(also=audit)
    changed = applied[audit.pk]
    others = sum(applied.values()) - changed
    elsewhere = f" and {others} in the site's latest audit{'s' if len(applied) > 2 else ''}" if others else ""
    messages.success(request, f"Rule added for the site: {changed} issue{'s' if changed != 1 else ''} of this "
                              f"audit ignored{elsewhere}; later audits of the site apply it too.")
    return redirect(_back_to_list(audit, request.GET))


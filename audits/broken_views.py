"""Broken links by target: the table of dead URLs and the list of pages linking to one of them."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render

from . import broken
from .tables import audit_view, query_text, sort_choice, wants_partial, window

# Sources shown in a target's row; the rest load when the row is expanded.
PREVIEW = 3
# Sources per page of a target's expanded list: a dead footer link has thousands.
SOURCES_PER_PAGE = 100


@audit_view("GET")
def broken_list(request, audit):
    filters = {
        "scope": request.GET.get("scope", ""),
        "q": query_text(request.GET, "q"),
    }
    sort, order = sort_choice(request, broken.TARGET_SORTS, "-sources")
    page = window(broken.targets(audit, scope=filters["scope"], q=filters["q"]).order_by(*order), request)
    context = {
        "audit": audit, "page_obj": page, "filters": filters, "sort": sort,
        "rows": broken.describe(audit, page.object_list, preview=PREVIEW), "preview": PREVIEW,
        "scopes": [("internal", "Internal"), ("external", "External")],
    }
    if wants_partial(request):
        return render(request, "audits/_broken_table.html", context)
    context["totals"] = broken.totals(audit)
    return render(request, "audits/broken_list.html", context)


@audit_view("GET")
def broken_sources(request, audit):
    """All pages linking to one dead target (?target=), a page at a time.

    The expanded row of the targets table loads it over htmx; without
    JavaScript the row's link opens it as a page of its own.
    """
    target = query_text(request.GET, "target", limit=None)
    page = window(broken.sources(audit, target), request, per_page=SOURCES_PER_PAGE)
    if not page.object_list and page.number == 1:
        raise Http404("No broken link points at this URL.")
    context = {"audit": audit, "target": target, "page_obj": page}
    if wants_partial(request):
        return render(request, "audits/_broken_sources.html", context)
    return render(request, "audits/broken_sources.html", context)

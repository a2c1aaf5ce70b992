"""The pages table of an audit and one page's own view (its issues, links and redirect chain)."""

from __future__ import annotations

from django.db.models import Q
from django.shortcuts import get_object_or_404, render

from crawler.catalogue import CATALOGUE

from .inlinks import edges_to
from .models import Issue, LinkEdge, Page, PageChange
from .tables import audit_view, sort_choice, window

# A page's own view lists at most this many links each way.
LINK_LIMIT = 500
PAGE_CHANGE_FILTERS = PageChange.Change.choices


# A URL's status class is its own answer: one that redirected is 3xx whatever it
# ended at (status_code keeps the final result, which broken-link checks need).
STATUS_CLASSES = {
    "2xx": Q(redirect_count=0, status_code__gte=200, status_code__lt=300),
    "3xx": Q(redirect_count__gt=0) | Q(status_code__gte=300, status_code__lt=400),
    "4xx": Q(redirect_count=0, status_code__gte=400, status_code__lt=500),
    "5xx": Q(redirect_count=0, status_code__gte=500, status_code__lt=600),
    "error": Q(redirect_count=0, status_code__isnull=True),
}

PAGE_SORTS = {
    "depth": ["depth", "id"], "-depth": ["-depth", "-id"],
    "url": ["url", "id"], "-url": ["-url", "-id"],
    "status": ["status_code", "id"], "-status": ["-status_code", "-id"],
    "time": ["total_ms", "id"], "-time": ["-total_ms", "-id"],
    "size": ["size_bytes", "id"], "-size": ["-size_bytes", "-id"],
    "inlinks": ["inlinks", "id"], "-inlinks": ["-inlinks", "-id"],
    "title": ["title", "id"], "-title": ["-title", "-id"],
}

CONTENT_TYPES = ["text/html", "text/css", "application/javascript", "text/javascript", "image/",
                 "application/pdf", "application/xml", "application/json"]


@audit_view("GET")
def page_list(request, audit):
    filters = {
        "kind": request.GET.get("kind", ""),
        "status": request.GET.get("status", ""),
        "type": request.GET.get("type", "").strip()[:100],
        "depth": request.GET.get("depth", "").strip(),
        "q": request.GET.get("q", "").strip()[:500],
        "change": request.GET.get("change", ""),
    }
    if filters["change"] in PageChange.Change.values:
        return _page_changes(request, audit, filters)
    pages = Page.objects.filter(audit=audit)
    if filters["kind"] in Page.Kind.values:
        pages = pages.filter(kind=filters["kind"])
    if filters["status"] in STATUS_CLASSES:
        pages = pages.filter(STATUS_CLASSES[filters["status"]])
    if filters["type"]:
        pages = pages.filter(content_type__istartswith=filters["type"])
    if filters["depth"].isdigit():
        pages = pages.filter(depth=int(filters["depth"]))
    if filters["q"]:
        pages = pages.filter(url__icontains=filters["q"])
    sort, order = sort_choice(request, PAGE_SORTS, "depth")
    pages = pages.order_by(*order).only(
        "id", "audit_id", "url", "kind", "status_code", "redirect_count", "fetch_error", "content_type", "depth",
        "title", "total_ms", "size_bytes", "inlinks",
    )
    page = window(pages, request)
    context = {
        "audit": audit, "page_obj": page, "filters": filters, "sort": sort,
        "kinds": Page.Kind.choices, "status_classes": list(STATUS_CLASSES), "content_types": CONTENT_TYPES,
        "changes": PAGE_CHANGE_FILTERS if audit.change_counts is not None else [],
        "table": "audits/_page_table.html",
    }
    if request.htmx:
        return render(request, "audits/_page_table.html", context)
    return render(request, "audits/page_list.html", context)


def _page_changes(request, audit, filters):
    """The pages table for ?change=: the PageChange rows the diff wrote, with before and after."""
    changes = PageChange.objects.filter(audit=audit, change=filters["change"])
    if filters["q"]:
        changes = changes.filter(url__icontains=filters["q"])
    page = window(changes.order_by("url", "id"), request)
    context = {
        "audit": audit, "page_obj": page, "filters": filters, "sort": "url",
        "kinds": Page.Kind.choices, "status_classes": list(STATUS_CLASSES), "content_types": CONTENT_TYPES,
        "changes": PAGE_CHANGE_FILTERS, "table": "audits/_page_change_table.html",
    }
    if request.htmx:
        return render(request, "audits/_page_change_table.html", context)
    return render(request, "audits/page_list.html", context)


@audit_view("GET")
def page_detail(request, audit, page_id):
    page = get_object_or_404(Page, pk=page_id, audit=audit)
    issues = list(
        Issue.objects.filter(audit=audit, page=page).order_by("id")
        .only("id", "code", "severity", "message", "target_url", "review", "url")[:LINK_LIMIT]
    )
    outlinks = list(
        LinkEdge.objects.filter(audit=audit, source_hash=page.url_hash).order_by("id")
        .only("target_url", "target_hash", "tag", "anchor_text", "nofollow", "internal")[:LINK_LIMIT]
    )
    inlinks = list(
        edges_to(audit, page.url_hash)
        .only("source_url", "source_hash", "tag", "anchor_text", "nofollow")[:LINK_LIMIT]
    )
    # One lookup resolves every link end that was crawled to its page row, for
    # a status and a link to its own view.
    hashes = {edge.target_hash for edge in outlinks} | {edge.source_hash for edge in inlinks}
    known = {
        row[0]: {"id": row[1], "status_code": row[2], "fetch_error": row[3]}
        for row in Page.objects.filter(audit=audit, url_hash__in=list(hashes))
        .values_list("url_hash", "id", "status_code", "fetch_error")
    } if hashes else {}
    context = {
        "audit": audit, "page": page,
        "issues": [{"issue": i, "type": CATALOGUE.get(i.code)} for i in issues],
        "outlinks": [{"edge": e, "target": known.get(e.target_hash)} for e in outlinks],
        "inlinks": [{"edge": e, "source": known.get(e.source_hash)} for e in inlinks],
        "chain": [_hop(h) for h in page.redirect_chain or []],
        "link_limit": LINK_LIMIT,
    }
    return render(request, "audits/page_detail.html", context)


def _hop(hop) -> dict:
    if isinstance(hop, dict):
        return {"url": hop.get("url", ""), "status": hop.get("status"), "location": hop.get("location", "")}
    if isinstance(hop, list | tuple) and len(hop) >= 3:
        return {"url": hop[0], "status": hop[1], "location": hop[2]}
    return {"url": str(hop), "status": None, "location": ""}

"""The pages table of an audit and one page's own view (its issues, links and redirect chain)."""

from __future__ import annotations

from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, render

from crawler.catalogue import CATALOGUE
from crawler.urls import url_hash

from .inlinks import LINK_TAGS, counts_stored, edges_to, inlink_counts
from .models import Audit, Issue, LinkEdge, Page, PageChange
from .sections import clean_section, under_section
from .tables import audit_view, query_text, sort_choice, wants_partial, window

# A page's own view lists at most this many links each way.
LINK_LIMIT = 500
PAGE_CHANGE_FILTERS = PageChange.Change.choices
# Filters a PageChange row cannot answer: it records a page (never a resource or an external
# URL) by its URL and its status before and after, with no depth or content type. Set along
# with ?change=, they are named as not applied rather than shown as if they were.
NOT_FOR_CHANGES = [("kind", "Kind"), ("status", "Status"), ("type", "Content type"), ("depth", "Depth")]


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
        "type": query_text(request.GET, "type", 100),
        "depth": request.GET.get("depth", "").strip(),
        "q": query_text(request.GET, "q"),
        "change": request.GET.get("change", ""),
        "section": clean_section(query_text(request.GET, "section")),
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
    # isdigit() alone accepts "²" and other digits int() refuses: ASCII digits only, and few
    # (int() refuses thousands of digits; no crawl goes five digits deep).
    if filters["depth"].isascii() and filters["depth"].isdigit() and len(filters["depth"]) <= 5:
        pages = pages.filter(depth=int(filters["depth"]))
    if filters["q"]:
        pages = pages.filter(url__icontains=filters["q"])
    pages = under_section(pages, audit, filters["section"])
    # Until the counts are stored (the audit runs, or stopped and its links are
    # not indexed yet) the column is counted for the rows shown, so there is no
    # column to sort by: the inlinks sort falls back to the default.
    stored = counts_stored(audit)
    sorts = PAGE_SORTS if stored else {k: v for k, v in PAGE_SORTS.items() if k.lstrip("-") != "inlinks"}
    sort, order = sort_choice(request, sorts, "depth")
    pages = pages.order_by(*order).only(
        "id", "audit_id", "url", "url_hash", "kind", "status_code", "redirect_count", "redirect_chain", "final_url",
        "fetch_error", "content_type", "depth", "title", "total_ms", "size_bytes", "inlinks",
    )
    page = window(pages, request)
    live = None if stored else live_inlinks(audit, [p.url_hash for p in page.object_list])
    rows = [{"page": p, "inlinks": p.inlinks if stored else live.get(p.url_hash),
             "redirect": redirect_of(p, audit.origin)} for p in page.object_list]
    context = {
        "audit": audit, "page_obj": page, "rows": rows, "filters": filters, "sort": sort,
        "inlinks_sortable": stored,
        "kinds": Page.Kind.choices, "status_classes": list(STATUS_CLASSES), "content_types": CONTENT_TYPES,
        "changes": PAGE_CHANGE_FILTERS if audit.change_counts is not None else [],
        "table": "audits/_page_table.html",
    }
    if wants_partial(request):
        return render(request, "audits/_page_table.html", context)
    return render(request, "audits/page_list.html", context)


def _page_changes(request, audit, filters):
    """The pages table for ?change=: the PageChange rows the diff wrote, with before and after."""
    changes = PageChange.objects.filter(audit=audit, change=filters["change"])
    if filters["q"]:
        changes = changes.filter(url__icontains=filters["q"])
    changes = under_section(changes, audit, filters["section"])
    page = window(changes.order_by("url", "id"), request)
    context = {
        "audit": audit, "page_obj": page, "filters": filters, "sort": "url",
        "not_applied": [label for name, label in NOT_FOR_CHANGES if filters[name]],
        "kinds": Page.Kind.choices, "status_classes": list(STATUS_CLASSES), "content_types": CONTENT_TYPES,
        "changes": PAGE_CHANGE_FILTERS, "table": "audits/_page_change_table.html",
    }
    if wants_partial(request):
        return render(request, "audits/_page_change_table.html", context)
    return render(request, "audits/page_list.html", context)


# Counting links for the rows shown scans the audit's edges (no index by target
# while it runs), a cost that grows with the audit: past this many pages, not done.
LIVE_INLINKS_MAX_PAGES = 2_000


def live_inlinks(audit, hashes: list[str]) -> dict[str, int]:
    """Links to each of ``hashes`` while the counts are not stored; none past LIVE_INLINKS_MAX_PAGES
    pages, which the table shows as counted when the crawl ends."""
    if audit.pages_crawled > LIVE_INLINKS_MAX_PAGES:
        return {}
    return inlink_counts(audit, hashes)


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
    # Links (what the pages table's inlinks column counts) apart from references
    # by images, scripts, stylesheets, hreflang and forms. One read of the first
    # edges fills both lists; each heading's total is counted apart only when
    # that read did not reach the end, so it agrees with the table however long.
    to_page = edges_to(audit, page.url_hash)
    edges = list(to_page.only("source_url", "source_hash", "tag", "anchor_text", "nofollow")[:2 * LINK_LIMIT])
    links = [e for e in edges if e.tag in LINK_TAGS]
    others = [e for e in edges if e.tag not in LINK_TAGS]
    inlink_total, reference_total = len(links), len(others)
    if len(edges) == 2 * LINK_LIMIT:
        by_tag = dict(to_page.order_by().values("tag").annotate(n=Count("id")).values_list("tag", "n"))
        inlink_total = sum(n for tag, n in by_tag.items() if tag in LINK_TAGS)
        reference_total = sum(by_tag.values()) - inlink_total
    inlinks, references = links[:LINK_LIMIT], others[:LINK_LIMIT]
    # One lookup resolves every link end that was crawled to its page row, for
    # a status and a link to its own view.
    redirect = redirect_of(page, audit.origin)
    hashes = ({edge.target_hash for edge in outlinks} | {edge.source_hash for edge in inlinks}
              | {edge.source_hash for edge in references})
    if redirect:
        hashes.add(url_hash(page.final_url))
    # A link end that redirected keeps its own answer beside the final one, so
    # "Links out" shows "301 → /about" as the pages table does, not the 200 it reached.
    known = {
        row.url_hash: {"id": row.pk, "status_code": row.status_code, "fetch_error": row.fetch_error,
                       "redirect": redirect_of(row, audit.origin)}
        for row in Page.objects.filter(audit=audit, url_hash__in=list(hashes))
        .only("id", "url_hash", "status_code", "fetch_error", "redirect_chain", "final_url")
    } if hashes else {}
    context = {
        "audit": audit, "page": page,
        "issues": [{"issue": i, "type": CATALOGUE.get(i.code)} for i in issues],
        "outlinks": [{"edge": e, "target": known.get(e.target_hash)} for e in outlinks],
        "inlinks": [{"edge": e, "source": known.get(e.source_hash)} for e in inlinks],
        "inlink_total": inlink_total,
        "references": [{"edge": e, "source": known.get(e.source_hash)} for e in references],
        "reference_total": reference_total,
        "chain": [_hop(h) for h in page.redirect_chain or []],
        "redirect": redirect,
        "redirect_target": known.get(url_hash(page.final_url)) if redirect else None,
        "link_limit": LINK_LIMIT,
        # The audit whose parse a reused page carries may have been deleted since: then no link to a 404.
        "unchanged_since_kept": page.unchanged_since is not None
        and Audit.objects.filter(pk=page.unchanged_since, owner=audit.owner_id).exists(),
    }
    return render(request, "audits/page_detail.html", context)


def redirect_of(page: Page, origin: str = "") -> dict | None:
    """What a URL that redirected answered itself (its first hop's status), and where it ended; None otherwise.

    ``status_code`` keeps the final answer (the broken-link checks need it), so
    on screen a redirect reads "301 → /new/", not the 200 of the page it reached.
    """
    chain = [_hop(h) for h in page.redirect_chain or []]
    if not chain:
        return None
    target = page.final_url or chain[-1]["location"]
    inside = f"{origin}/" if origin else ""
    return {"status": chain[0]["status"], "target": target, "hops": len(chain),
            "short": target[len(origin):] if inside and target.startswith(inside) else target,
            "final_status": page.status_code, "final_error": page.fetch_error}


def _hop(hop) -> dict:
    if isinstance(hop, dict):
        return {"url": hop.get("url", ""), "status": hop.get("status"), "location": hop.get("location", "")}
    if isinstance(hop, list | tuple) and len(hop) >= 3:
        return {"url": hop[0], "status": hop[1], "location": hop[2]}
    return {"url": str(hop), "status": None, "location": ""}

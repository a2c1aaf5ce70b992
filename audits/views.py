"""Screens. Function views that render a whole page or, for HTMX requests, a partial of it.

Each view follows the same order: authorise (``audit_for_user`` answers 404
for anyone but the owner), read and validate input, query, render. Partials
live in ``templates/audits/_*.html`` and are included by their page, so the
page and the HTMX swap always render the same markup.

Tables stay fast on an audit of 100,000 pages: filters hit the (audit, …)
indexes, sorting is limited to a whitelist, and pagination fetches one row
more than it shows to know whether there is a next page instead of counting
the filtered table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import wraps

from django.contrib import messages
from django.db.models import Case, Count, IntegerField, Q, Value, When
from django.http import HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from crawler.catalogue import CATALOGUE
from crawler.urls import url_hash

from . import exports
from .access import audit_for_user
from .charts import Bar, bar_chart
from .forms import AuditForm
from .inlinks import edges_to
from .models import (
    Audit,
    ChunkLease,
    GoneIssue,
    Issue,
    IssueCode,
    LinkEdge,
    Page,
    PageChange,
    Severity,
)
from .services import (
    PrivateTargetsRefused,
    QuotaExceeded,
    cancel_audit,
    create_audit,
    private_targets_allowed,
    rerun_audit,
    resume_audit,
)

PER_PAGE = 50
# Offsets deeper than this are refused: nobody pages 2,000 screens deep, and a
# huge OFFSET makes the database walk every skipped row.
MAX_PAGE_NUMBER = 2000
# A page's own view lists at most this many links each way.
LINK_LIMIT = 500

SEVERITY_ORDER = [Severity.CRITICAL, Severity.WARNING, Severity.NOTICE]


def owned_view(load, id_name: str, *methods):
    """Load the object for its owner (404 for anyone else), then check the HTTP method.

    Ownership comes first so a stranger gets the same 404 from every URL of an
    object, whatever the method, and learns nothing about which ids exist.
    """
    allowed = set(methods) | ({"HEAD"} if "GET" in methods else set())

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            owned = load(request, kwargs.pop(id_name))
            if request.method not in allowed:
                return HttpResponseNotAllowed(sorted(allowed))
            return view(request, owned, *args, **kwargs)
        return wrapper
    return decorate


def audit_view(*methods):
    return owned_view(audit_for_user, "audit_id", *methods)


# --- pagination ----------------------------------------------------------------


@dataclass
class Window:
    """One page of a table, known to have a next page without counting the table."""

    object_list: list
    number: int
    has_next: bool
    per_page: int

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1

    @property
    def start_index(self) -> int:
        return (self.number - 1) * self.per_page + 1 if self.object_list else 0

    @property
    def end_index(self) -> int:
        return (self.number - 1) * self.per_page + len(self.object_list)


def window(queryset, request, per_page: int = PER_PAGE) -> Window:
    try:
        number = int(request.GET.get("page", 1))
    except (TypeError, ValueError):
        number = 1
    number = min(max(number, 1), MAX_PAGE_NUMBER)
    start = (number - 1) * per_page
    rows = list(queryset[start:start + per_page + 1])
    return Window(rows[:per_page], number, len(rows) > per_page, per_page)


def sort_choice(request, options: dict, default: str) -> tuple[str, list]:
    """The requested sort key if it is whitelisted, else the default; never raw user input."""
    key = request.GET.get("sort", default)
    if key not in options:
        key = default
    return key, options[key]


# --- the audit list and the new-audit form -----------------------------------


@require_GET
def audit_list(request):
    audits = Audit.objects.filter(owner=request.user).order_by("-created_at", "-id")
    page = window(audits, request, per_page=25)
    return render(request, "audits/audit_list.html", {"page_obj": page})


@require_http_methods(["GET", "POST"])
def audit_new(request):
    status, retry_after = 200, None
    if request.method == "POST":
        form = AuditForm(request.POST)
        if form.is_valid():
            try:
                audit = create_audit(request.user, **form.audit_fields())
            except QuotaExceeded as exc:
                form.add_error(None, str(exc))
                status = 429
                retry_after = getattr(exc, "retry_after", None)
            else:
                messages.success(request, "Audit queued; it starts as soon as a worker is free.")
                return redirect(audit)
        else:
            status = 400
    else:
        form = AuditForm()
    response = render(request, "audits/audit_form.html", {"form": form}, status=status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


# --- the audit page and its live partial -----------------------------------------


def _progress(audit: Audit) -> dict:
    """Numbers for the progress panel, derived from the audit's counters (no table scans)."""
    now = timezone.now()
    end = audit.finished_at or now
    elapsed = (end - audit.started_at) if audit.started_at else timedelta(0)
    seconds = max(elapsed.total_seconds(), 0.0)
    target = min(audit.max_pages, max(audit.pages_discovered, audit.pages_crawled)) or audit.max_pages
    rate = audit.pages_crawled / seconds if seconds >= 1 else 0.0
    remaining = max(target - audit.pages_crawled, 0)
    eta = timedelta(seconds=round(remaining / rate)) if audit.is_active and rate > 0 and remaining else None
    percent = 100 if audit.status == Audit.Status.COMPLETED else min(100, round(100 * audit.pages_crawled / target))
    return {
        "elapsed": timedelta(seconds=round(seconds)),
        "pages_per_second": rate,
        "eta": eta,
        "target": target,
        "percent": percent,
    }


def _summary(audit: Audit) -> dict:
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


RESPONSE_BUCKETS = [(0, 100), (100, 250), (250, 500), (500, 1000), (1000, 2000), (2000, 5000), (5000, None)]


def _charts(audit: Audit) -> dict:
    """Three small aggregate queries over the pages (kind=page), drawn as SVG."""
    pages = Page.objects.filter(audit=audit, kind=Page.Kind.PAGE)
    # One aggregate; a URL that redirected counts as 3xx (its own answer), as in the pages filter.
    classes = pages.aggregate(**{label: Count("id", filter=cond) for label, cond in STATUS_CLASSES.items()})
    status_chart = bar_chart(
        [Bar(label, value, f"bar-{label}") for label, value in classes.items()],
        title="Pages by status class", chart_id="chart-status",
    )

    depths = list(pages.values("depth").annotate(n=Count("id")).order_by("depth")[:30])
    depth_chart = bar_chart(
        [Bar(str(row["depth"]), row["n"], "bar-depth") for row in depths],
        title="Pages by click depth", chart_id="chart-depth",
    )

    buckets = {}
    for low, high in RESPONSE_BUCKETS:
        cond = Q(total_ms__gte=low) if high is None else Q(total_ms__gte=low, total_ms__lt=high)
        buckets[f"b{low}"] = Count("id", filter=cond)
    totals = pages.filter(status_code__isnull=False).aggregate(**buckets)
    time_chart = bar_chart(
        [Bar(_bucket_label(low, high), totals[f"b{low}"] or 0, "bar-time") for low, high in RESPONSE_BUCKETS],
        title="Pages by response time (ms)", chart_id="chart-time",
    )
    return {"status": status_chart, "depth": depth_chart, "time": time_chart}


def _bucket_label(low: int, high: int | None) -> str:
    if high is None:
        return f"≥{low // 1000}s"
    if high < 1000:
        return f"<{high}"
    return f"<{high // 1000}s"


def _body_context(audit: Audit) -> dict:
    context = {"audit": audit, "progress": _progress(audit), "summary": _summary(audit),
               "charts": _charts(audit), "can_rerun": private_targets_allowed(audit),
               "change_labels": CHANGE_FILTERS}
    if audit.is_active:
        # A queued chunk no worker has taken yet: the cluster is busy, the audit is not stuck.
        context["waiting_for_worker"] = (
            audit.phase == Audit.Phase.CRAWLING
            and audit.chunks.filter(state=ChunkLease.State.QUEUED).exists()
            and not audit.chunks.filter(state=ChunkLease.State.LEASED).exists())
        # While it runs, the newest rows show that work is happening.
        context["latest_pages"] = list(
            Page.objects.filter(audit=audit).order_by("-id")
            .only("id", "audit_id", "url", "status_code", "redirect_count", "fetch_error", "depth", "title")[:8]
        )
    return context


@audit_view("GET")
def audit_detail(request, audit):
    context = _body_context(audit)
    if request.htmx:
        return render(request, "audits/_audit_body.html", context)
    return render(request, "audits/audit_detail.html", context)


@audit_view("GET")
def audit_progress(request, audit):
    """The live part of the audit page; once the audit has ended, its last state and a stop to the polling."""
    body = render_to_string("audits/_audit_body.html", _body_context(audit), request)
    return HttpResponse(body) if audit.is_active else HttpResponseStopPolling(body)


# --- tables ----------------------------------------------------------------------

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


# --- CSV downloads -----------------------------------------------------------------


@audit_view("GET")
def export_pages(request, audit):
    return exports.csv_response(f"audit-{audit.pk}-pages.csv", exports.PAGE_COLUMNS, exports.page_rows(audit))


@audit_view("GET")
def export_issues(request, audit):
    return exports.csv_response(f"audit-{audit.pk}-issues.csv", exports.ISSUE_COLUMNS, exports.issue_rows(audit))


@audit_view("GET")
def export_links(request, audit):
    return exports.csv_response(f"audit-{audit.pk}-links.csv", exports.LINK_COLUMNS, exports.link_rows(audit))


# --- actions (POST only; the CSRF middleware checks the token) ----------------------


@audit_view("POST")
def audit_cancel(request, audit):
    if cancel_audit(audit):
        messages.success(request, "Audit cancelled; everything crawled so far is kept.")
    else:
        messages.info(request, "The audit had already ended.")
    return redirect(audit)


@audit_view("POST")
def audit_resume(request, audit):
    try:
        resumed = resume_audit(audit)
    except (PrivateTargetsRefused, QuotaExceeded) as exc:
        messages.error(request, str(exc))
        return redirect(audit)
    if resumed:
        messages.success(request, "Audit resumed from where it stopped.")
    else:
        messages.info(request, "Only a failed or cancelled audit can be resumed.")
    return redirect(audit)


@audit_view("POST")
def audit_rerun(request, audit):
    try:
        fresh = rerun_audit(audit)
    except (PrivateTargetsRefused, QuotaExceeded) as exc:
        messages.error(request, str(exc))
        return redirect(audit)
    messages.success(request, f"Started a new audit with the same settings as audit {audit.pk}.")
    return redirect(fresh)


@audit_view("POST")
def audit_delete(request, audit):
    # A running crawl is stopped first so its workers see "cancelled" (or a
    # missing row) and write nothing more.
    if audit.is_active:
        cancel_audit(audit)
    label = audit.start_url
    audit.delete()
    messages.success(request, f"Deleted the audit of {label}.")
    return redirect("audit-list")

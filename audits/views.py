"""The audit screens: the list, the new-audit form, the audit page with its live partial, actions.

Function views that render a whole page or, for HTMX requests, a partial of
it. Each follows the same order: authorise (``audit_for_user`` answers 404 for
anyone but the owner), read and validate input, query, render. Partials live in
``templates/audits/_*.html`` and are included by their page, so the page and the
HTMX swap always render the same markup. The tables are in ``issue_views`` and
``page_views``, the downloads in ``export_views``.
"""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.core.cache import cache
from django.db.models import Count, Q
from django.http import Http404, HttpResponse, HttpResponseNotFound
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from config.client_ip import client_address

from . import validation
from .charts import Bar, bar_chart
from .crawl import reuse
from .forms import AuditForm
from .issue_views import CHANGE_FILTERS
from .models import Audit, ChunkLease, Issue, Page, Site
from .page_views import STATUS_CLASSES, redirect_of
from .progress_panel import progress, stop_note
from .purge import AuditInUse, delete_soon
from .sections import section_counts
from .services import (
    PrivateTargetsRefused,
    QuotaExceeded,
    SiteBusy,
    SourceGone,
    cancel_audit,
    create_audit,
    follow_up,
    private_targets_allowed,
    rerun_audit,
    resume_audit,
)
from .summary import issue_summary
from .tables import audit_view, wants_partial, window
from .thresholds import BY_NAME as THRESHOLD_NAMES

# A validation's checklist rows shown on its page (still there and unknown first).
CHECKLIST_ROWS = 500

# --- the audit list and the new-audit form -----------------------------------


@require_GET
def audit_list(request):
    # A row shows none of robots.txt, which may be 512 KB an audit.
    audits = (Audit.objects.filter(owner=request.user, deleting=False, site__deleting=False)
              .defer("robots_body").order_by("-created_at", "-id"))
    page = window(audits, request, per_page=25)
    return render(request, "audits/audit_list.html", {"page_obj": page})


@require_http_methods(["GET", "POST"])
def audit_new(request):
    status, retry_after = 200, None
    if request.method == "POST":
        form = AuditForm(request.POST)
        if form.is_valid():
            saved = Site.objects.filter(owner=request.user, start_url=form.cleaned_data["start_url"],
                                        deleting=False).first()
            changes = form.changes_to(saved) if saved else []
            try:
                audit = create_audit(request.user, address=client_address(request), **form.audit_fields())
            except QuotaExceeded as exc:
                form.add_error(None, str(exc))
                status = 429
                retry_after = getattr(exc, "retry_after", None)
            except SiteBusy as exc:
                form.add_error(None, str(exc))
                status = 409
            else:
                messages.success(request, "Audit queued; it starts as soon as a worker is free.")
                if changes:
                    # A person who only meant a quick look must see what their site's next runs crawl by.
                    messages.info(request, "These are now the site's saved settings, which its scheduled runs "
                                           "and Run now use: " + "; ".join(changes) + ".")
                return redirect(audit)
        else:
            status = 400
    else:
        # From a site's page: its saved settings, so changing one keeps the others.
        given = request.GET.get("site", "")
        site = (Site.objects.filter(pk=int(given), owner=request.user, deleting=False).first()
                if given.isascii() and given.isdigit() and len(given) <= 18 else None)
        form = AuditForm(initial=AuditForm.initial_for(site) if site else None)
    response = render(request, "audits/audit_form.html", {"form": form, "threshold_names": THRESHOLD_NAMES},
                      status=status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


# --- the audit page and its live partial -----------------------------------------


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

    # One bar per depth up to 29, and one "30+" bar for every page deeper, so the
    # bars add up to the pages; depths no page has get no bar.
    last = 30
    depths = pages.aggregate(**{f"d{depth}": Count("id", filter=Q(depth=depth)) for depth in range(last)},
                             deeper=Count("id", filter=Q(depth__gte=last)))
    depth_bars = [Bar(str(depth), depths[f"d{depth}"], "bar-depth") for depth in range(last)]
    depth_bars.append(Bar(f"{last}+", depths["deeper"], "bar-depth"))
    depth_chart = bar_chart(
        [bar for bar in depth_bars if bar.value],
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


def _sections(audit: Audit) -> dict:
    """Open and reviewed issues per top-level section, like the totals beside them (ignored ones left out)."""
    return section_counts(Issue.objects.filter(audit=audit).exclude(review=Issue.Review.IGNORED), audit.origin)


# While a crawl runs, the per-type table and the charts are counted at most this often:
# each reads every issue or page of the audit, and the page polls every 2 s.
LIVE_TOTALS_SECONDS = 15


def _totals(audit: Audit) -> tuple[dict, dict]:
    """(issue summary, charts): fresh once the audit has ended, at most LIVE_TOTALS_SECONDS old while it runs."""
    if not audit.is_active:
        return issue_summary(audit), _charts(audit)
    key = f"audit-totals:{audit.pk}:{audit.created_at.timestamp()}"
    totals = cache.get(key)
    if totals is None:
        totals = issue_summary(audit), _charts(audit)
        cache.set(key, totals, LIVE_TOTALS_SECONDS)
    return totals


def _body_context(audit: Audit) -> dict:
    summary, charts = _totals(audit)
    context = {"audit": audit, "progress": progress(audit), "summary": summary,
               "charts": charts, "can_rerun": private_targets_allowed(audit),
               "change_labels": CHANGE_FILTERS}
    if not audit.is_active:
        # A GROUP BY over the URLs of every issue: once, when the numbers are
        # final, not on every two-second poll of a running crawl.
        context["sections"] = _sections(audit)
    if audit.status == Audit.Status.CANCELLED:
        context["stop_note"] = stop_note(audit)
    if audit.status == Audit.Status.COMPLETED:
        # A validation's or a delta crawl's own account of itself, once it is final.
        context["verdicts"] = validation.counts(audit)
        if context["verdicts"] is not None:
            context["checklist"] = validation.checklist(audit, limit=CHECKLIST_ROWS)
            context["checklist_rows"] = CHECKLIST_ROWS
        if audit.mode == Audit.Mode.DELTA:
            context["reused"] = Page.objects.filter(audit=audit).exclude(unchanged_since=None).count()
            context["reuse_refusal"] = reuse.refusal(audit) if audit.source_id and not context["reused"] else None
    if audit.is_active:
        # Chunks running, and queued ones no worker has taken yet: when none
        # runs, the clusters are busy and the audit is not stuck.
        chunks = dict(ChunkLease.objects.open_for(audit.pk).values("state").annotate(n=Count("id"))
                      .values_list("state", "n"))
        context["chunks_running"] = chunks.get(ChunkLease.State.LEASED, 0)
        context["chunks_waiting"] = chunks.get(ChunkLease.State.QUEUED, 0)
        context["waiting_for_worker"] = (audit.phase == Audit.Phase.CRAWLING and context["chunks_waiting"]
                                         and not context["chunks_running"])
        # While it runs, the newest rows show that work is happening.
        context["latest_pages"] = [
            {"page": p, "redirect": redirect_of(p, audit.origin)}
            for p in Page.objects.filter(audit=audit).order_by("-id").only(
                "id", "audit_id", "url", "status_code", "redirect_count", "redirect_chain", "final_url",
                "fetch_error", "depth", "title")[:8]
        ]
    return context


@audit_view("GET")
def audit_detail(request, audit):
    context = _body_context(audit)
    if wants_partial(request):
        return render(request, "audits/_audit_body.html", context)
    return render(request, "audits/audit_detail.html", context)


def _reload_when_gone(view):
    """Answer a poll of an audit that is gone with a 404 that reloads the page (HX-Refresh).

    htmx keeps polling through 404s, and only 286 stops it; a 286 here would tell a
    stranger which ids exist, so the answer stays the same 404 for a deleted audit
    and another person's, and the reload shows the ordinary not-found page.
    """
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except Http404:
            if not request.htmx:
                raise
            response = HttpResponseNotFound()
            response["HX-Refresh"] = "true"
            return response
    return wrapper


@_reload_when_gone
@audit_view("GET")
def audit_progress(request, audit):
    """The live part of the audit page; once the audit has ended, its last state and a stop to the polling."""
    body = render_to_string("audits/_audit_body.html", _body_context(audit), request)
    return HttpResponse(body) if audit.is_active else HttpResponseStopPolling(body)


# --- actions (POST only; the CSRF middleware checks the token) ----------------------


@audit_view("POST")
def audit_cancel(request, audit):
    # No flash when it worked: the page's banner says who cancelled it and when,
    # and the same news twice on one screen reads as two events.
    if not cancel_audit(audit, by=request.user):
        messages.info(request, "The audit had already ended.")
    return redirect(audit)


@audit_view("POST")
def audit_resume(request, audit):
    try:
        resumed = resume_audit(audit)
    except (PrivateTargetsRefused, QuotaExceeded, SiteBusy) as exc:
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
        fresh = rerun_audit(audit, address=client_address(request))
    except (PrivateTargetsRefused, QuotaExceeded, SiteBusy, SourceGone) as exc:
        messages.error(request, str(exc))
        return redirect(audit)
    messages.success(request, f"Started a new audit with the same settings as audit {audit.pk}.")
    return redirect(fresh)


@audit_view("POST")
def audit_follow_up(request, audit, mode):
    """A validation (re-check only this audit's issues) or a delta crawl (re-crawl reusing what did not change)."""
    if audit.status != Audit.Status.COMPLETED or audit.mode == Audit.Mode.VALIDATE:
        messages.error(request, "Only a completed full or delta audit can be re-checked or re-crawled from.")
        return redirect(audit)
    try:
        fresh = follow_up(audit, mode, address=client_address(request))
    except (PrivateTargetsRefused, QuotaExceeded, SiteBusy, SourceGone) as exc:
        messages.error(request, str(exc))
        return redirect(audit)
    what = "Re-checking the issues" if mode == Audit.Mode.VALIDATE else "Re-crawling what changed since"
    messages.success(request, f"{what} of audit {audit.pk}.")
    return redirect(fresh)


@audit_view("POST")
def audit_delete(request, audit):
    label = audit.start_url
    try:
        delete_soon(audit)
    except AuditInUse as exc:
        messages.error(request, str(exc))
        return redirect(audit)
    messages.success(request, f"Deleted the audit of {label}; a worker removes its rows in the background.")
    return redirect("audit-list")

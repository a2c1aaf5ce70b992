"""Sites: the list of a person's sites, one site's history and trend, its schedule, alerts and ignore rules.

Same order as the audit views: authorise (``site_for_user`` answers 404 for
anyone but the owner), read and validate input, query, render.
"""

from __future__ import annotations

import copy

from django.contrib import messages
from django.db.models import Count, DateTimeField, F, OuterRef, Subquery
from django.db.models.functions import Coalesce, Greatest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from config.client_ip import client_address

from . import schedules
from .access import site_for_user
from .charts import Line, line_chart
from .diff import totals
from .forms import IgnoreRuleForm, SiteScheduleForm
from .issue_views import codes_present
from .models import Audit, IgnoreRule, Notification, Site, SkippedRun
from .purge import delete_site_soon
from .services import PrivateTargetsRefused, QuotaExceeded, SiteBusy, run_site_now
from .tables import owned_view, window

# Audits drawn in a site's trend chart, newest last.
TREND_AUDITS = 30
# Alerts listed on a site's page, newest first: enough to see a webhook that keeps failing.
RECENT_ALERTS = 10


def site_view(*methods):
    return owned_view(site_for_user, "site_id", *methods)


@require_GET
def site_list(request):
    """Each site with its latest full audit and the previous completed one, and its skipped runs: four queries
    a screen."""
    # A validation re-fetches only the URLs with issues, so its counts are not the
    # site's: the figures and the delta are the latest audit that crawled the site,
    # or a validation when that is all the site has left.
    audits = Audit.objects.filter(site=OuterRef("pk"), deleting=False).order_by("-pk").values("pk")
    sites = (Site.objects.filter(owner=request.user, deleting=False)
             .annotate(latest_id=Coalesce(Subquery(audits.exclude(mode=Audit.Mode.VALIDATE)[:1]),
                                          Subquery(audits[:1])))
             .order_by("start_url", "id"))
    page = window(sites, request, per_page=25)
    audit_rows = Audit.objects.defer("robots_body")  # a row shows none of robots.txt, up to 512 KB an audit
    latest = audit_rows.in_bulk([site.latest_id for site in page.object_list if site.latest_id])
    baselines = audit_rows.in_bulk([a.baseline_id for a in latest.values() if a.baseline_id])
    skips = _skips_in_a_row(page.object_list)
    rows = []
    for site in page.object_list:
        audit = latest.get(site.latest_id)
        base = baselines.get(audit.baseline_id) if audit else None
        skipped, reason = skips.get(site.pk, (0, ""))
        rows.append({"site": site, "audit": audit, "changes": totals(audit.change_counts) if audit else {},
                     "delta": _delta(audit, base), "skipped": skipped, "skip_reason": reason})
    return render(request, "audits/site_list.html", {"page_obj": page, "rows": rows})


def _skips_in_a_row(sites: list[Site]) -> dict[int, tuple[int, str]]:
    """(How many runs in a row started no audit, the newest one's reason) by site, for the scheduled ``sites``.

    Without it a site whose runs keep being skipped lists its last audit, however old, as if all were well.
    The row counts skips since the latest of: its latest scheduled audit began, its schedule went live (set
    or resumed: older skips were another schedule's), the site was made. A run held back by the owner's
    running-audit limit that may still start (its site's latest run time) is waiting, not skipped. An audit
    deleted (or being deleted) no longer ends a series: the skips before it count again.
    """
    scheduled = [site.pk for site in sites if site.is_scheduled]
    if not scheduled:
        return {}
    last_run = Audit.objects.filter(site=OuterRef("pk"), trigger=Audit.Trigger.SCHEDULE, deleting=False)
    since = Greatest(Coalesce(Subquery(last_run.order_by("-pk").values("created_at")[:1]), F("created_at")),
                     Coalesce(F("schedule_set_at"), F("created_at")), output_field=DateTimeField())
    skips = (SkippedRun.objects.filter(site=OuterRef("pk"), created_at__gt=OuterRef("since"))
             .exclude(reason=SkippedRun.Reason.STARTED_LATE).exclude(pk__in=SkippedRun.objects.waiting().values("pk")))
    rows = Site.objects.filter(pk__in=scheduled).annotate(since=since).annotate(
        skipped=Subquery(skips.order_by().values("site").annotate(n=Count("pk")).values("n")),
        newest=Subquery(skips.order_by("-created_at", "-id").values("reason")[:1]),
    ).values_list("pk", "skipped", "newest")
    return {pk: (skipped, SkippedRun.Reason(newest).label) for pk, skipped, newest in rows if skipped}


def _delta(audit: Audit | None, base: Audit | None) -> dict:
    """Issue counts by severity against the baseline's, for "+3 / -1" beside each."""
    if audit is None or base is None or audit.status != Audit.Status.COMPLETED:
        return {}
    return {severity: getattr(audit, f"issues_{severity}") - getattr(base, f"issues_{severity}")
            for severity in ("critical", "warning", "notice")}


def _trend(site: Site):
    # A validation re-checks a few URLs: its counts are not the site's, so it is no point on a trend.
    audits = list(site.audits.filter(status=Audit.Status.COMPLETED, deleting=False).exclude(mode=Audit.Mode.VALIDATE)
                  .order_by("-pk")[:TREND_AUDITS])[::-1]
    # In the site's zone, as its schedule and history read, so a 02:00 run is labelled 02:00.
    zone = site.zone()
    labels = [_when(audit, zone) for audit in audits]
    issues = line_chart(labels, [
        Line("Critical", [a.issues_critical for a in audits], "line-critical"),
        Line("Warnings", [a.issues_warning for a in audits], "line-warning"),
        Line("Notices", [a.issues_notice for a in audits], "line-notice"),
    ], title="Issues by severity, audit by audit", chart_id="trend-issues")
    pages = line_chart(labels, [Line("Pages", [a.pages_crawled for a in audits], "line-pages")],
                       title="Pages crawled, audit by audit", chart_id="trend-pages")
    # Audits finished before the score existed have none: the line joins those that do.
    scored = [a for a in audits if a.score is not None]
    score = line_chart([_when(a, zone) for a in scored],
                       [Line("Score", [a.score for a in scored], "line-score")],
                       title="Health score (0-100), audit by audit", chart_id="trend-score")
    return issues, pages, score


def _when(audit: Audit, zone) -> str:
    return audit.created_at.astimezone(zone).strftime("%m-%d %H:%M %Z")


def _site_context(request, site: Site, form: SiteScheduleForm | None = None,
                  rule_form: IgnoreRuleForm | None = None) -> dict:
    history = window(site.audits.filter(deleting=False).order_by("-pk"), request, per_page=20)
    issues_chart, pages_chart, score_chart = _trend(site)
    next_run = schedules.next_run(site) if site.is_scheduled and site.cron_expression() else None
    return {
        "site": site, "page_obj": history, "issues_chart": issues_chart, "pages_chart": pages_chart,
        "score_chart": score_chart,
        "form": form or SiteScheduleForm(instance=site), "next_run": next_run,
        "skipped": list(site.skipped_runs.all()[:10]),
        "alerts": list(Notification.objects.filter(audit__site=site).select_related("audit")
                       .order_by("-id")[:RECENT_ALERTS]),
        "running": site.audits.filter(status__in=Audit.ACTIVE).exists(),
        "rules": list(site.ignore_rules.select_related("created_by")),
        "rule_form": rule_form or IgnoreRuleForm(found=_latest_codes(site)),
        "request": _as_site_page(request, site),
    }


def _latest_codes(site: Site) -> list[tuple[str, str]]:
    """The issue types the site's latest ended audit found, by title: what a rule most likely targets."""
    latest = site.audits.filter(status__in=Audit.ENDED, pages_crawled__gt=0, deleting=False).order_by("-pk").first()
    return codes_present(latest, gone=False) if latest is not None else []


def _as_site_page(request, site: Site):
    """``request`` as the site page's own: a form refused by a POST view re-renders the page, whose
    pager (``page_href``) must link to the site page, not to the POST-only URL (as ``issue_views.as_list``)."""
    page_request = copy.copy(request)
    page_request.path = site.get_absolute_url()
    return page_request


@site_view("GET")
def site_detail(request, site):
    return render(request, "audits/site_detail.html", _site_context(request, site))


@site_view("POST")
def site_schedule(request, site):
    # The form gets a copy: validation sets the submitted values on its instance, and a page
    # that refuses them must still show the schedule as saved.
    form = SiteScheduleForm(request.POST, instance=copy.copy(site))
    if not form.is_valid():
        return render(request, "audits/site_detail.html", _site_context(request, site, form), status=400)
    site = form.save(commit=False)
    # Only the schedule's own columns: a scheduled run handled meanwhile moved last_due_at on this row.
    site.save(update_fields=form._meta.fields)
    schedules.saved(site, form.changed_data)
    if site.is_scheduled:
        messages.success(request, f"Schedule saved: next run {schedules.next_run(site):%Y-%m-%d %H:%M %Z}.")
    else:
        messages.success(request, "Saved." + (" The schedule is paused." if site.paused and site.cadence else ""))
    return redirect(site)


@site_view("POST")
def site_webhook_key(request, site):
    site.renew_webhook_key()
    messages.success(request, "The webhook has a new signing key: give it to your receiver, the old one "
                              "no longer matches.")
    return redirect(site)


@site_view("POST")
def site_pause(request, site):
    site.pause()
    schedules.sync(site)
    messages.success(request, "Schedule paused; no audit starts until you resume it.")
    return redirect(site)


@site_view("POST")
def site_resume(request, site):
    if site.cadence and schedules.scheduled_sites_left(site.owner, site) <= 0:
        messages.error(request, "You already have as many scheduled sites as allowed; unschedule one first.")
        return redirect(site)
    site.resume()
    schedules.sync(site)
    if site.is_scheduled:
        messages.success(request, f"Schedule resumed: next run {schedules.next_run(site):%Y-%m-%d %H:%M %Z}.")
    return redirect(site)


@site_view("POST")
def site_run(request, site):
    try:
        audit = run_site_now(site, address=client_address(request))
    except (PrivateTargetsRefused, SiteBusy, QuotaExceeded) as exc:
        messages.error(request, str(exc))
        return redirect(site)
    messages.success(request, "Audit queued; it starts as soon as a worker is free.")
    return redirect(audit)


@site_view("POST")
def site_delete(request, site):
    label = site.start_url
    delete_site_soon(site)
    messages.success(request, f"Deleted the site {label}, its schedule and all its audits; "
                              "a worker removes their rows in the background.")
    return redirect("site-list")


@site_view("POST")
def site_rule_add(request, site):
    """Add an ignore rule: the site's latest audit has its matching open issues ignored now, every later
    audit at its finalize (audits.diff)."""
    form = IgnoreRuleForm(request.POST, instance=IgnoreRule(site=site, created_by=request.user),
                          found=_latest_codes(site))
    if not form.is_valid() or (rule := form.save_new()) is None:
        return render(request, "audits/site_detail.html", _site_context(request, site, rule_form=form), status=400)
    applied = rule.apply_now()
    changed = sum(applied.values())
    where = f" in audit{'s' if len(applied) > 1 else ''} {' and '.join(map(str, applied))}" if applied else ""
    messages.success(request, f"Rule added: {changed} issue{'s' if changed != 1 else ''} ignored{where}; "
                              "later audits apply it too.")
    return redirect(f"{site.get_absolute_url()}#ignore-rules")


@site_view("POST")
def site_rule_delete(request, site, rule_id: int):
    # Only a rule of this site: another site's id finds nothing and changes nothing.
    deleted, _ = IgnoreRule.objects.filter(site=site, pk=rule_id).delete()
    if deleted:
        messages.success(request, "Rule deleted. Issues it already ignored stay ignored; open them again from "
                                  "the issues table.")
    return redirect(f"{site.get_absolute_url()}#ignore-rules")

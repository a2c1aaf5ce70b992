"""The numbers of the audit page's progress panel: how far, how fast lately, what is left, what phase.

Every number is a counter on the audit row or a count over an index range that
is small by construction: the rows written in the last SPEED_WINDOW
(``page_audit_crawled``), and the frontier rows still to check once the pages
are done (the pending and leased partial indexes). Nothing grows with the size
of the audit, so the panel can be polled every two seconds on a 100,000-page crawl.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from .models import Audit, FrontierURL, Page

# Speed is what the crawl did lately, not since it started: a crawl that sped
# up or stalled shows it within half a minute, and the estimate follows.
SPEED_WINDOW = timedelta(seconds=30)

# How an ended audit's phase reads: the phase it stopped in, in words.
STOPPED_IN = {
    Audit.Phase.QUEUED: "while waiting for a worker",
    Audit.Phase.STARTING: "while starting",
    Audit.Phase.CRAWLING: "while crawling",
    Audit.Phase.FINALIZING: "during the cross-page checks",
    Audit.Phase.DONE: "after the crawl",
}


def progress(audit: Audit, now=None) -> dict:
    """The panel's numbers. ``target`` is min(max pages, discovered), the same for the bar and the text."""
    now = now or timezone.now()
    seconds = audit.run_seconds(now)
    crawled = audit.pages_crawled
    target = min(audit.max_pages, max(audit.pages_discovered, crawled))
    percent = min(100, round(100 * crawled / target)) if target else (100 if not audit.is_active else 0)
    numbers = {
        "elapsed": timedelta(seconds=round(seconds)),
        "target": target,
        "percent": percent,
        "limited": audit.pages_discovered > audit.max_pages,
        "eta": None,
        "checks_left": None,
        "phase": phase_label(audit),
        "paused": None,
    }
    if not audit.is_active:
        # An ended audit has no "lately": its speed is the run's average.
        numbers.update(pages_per_second=crawled / seconds if seconds >= 1 else 0.0, speed_basis="average")
        return numbers

    began = audit.resumed_at or audit.started_at
    since = max(now - SPEED_WINDOW, began) if began else now
    span = (now - since).total_seconds()
    recent = Page.objects.filter(audit=audit, crawled_at__gte=since).aggregate(
        pages=Count("id", filter=Q(kind=Page.Kind.PAGE)), checks=Count("id", filter=~Q(kind=Page.Kind.PAGE)))
    page_rate = recent["pages"] / span if span >= 1 else 0.0
    check_rate = recent["checks"] / span if span >= 1 else 0.0
    numbers.update(pages_per_second=page_rate, speed_basis=f"last {round(span)} s")
    # A crawl the site asked to pause (Retry-After) counts down the wait, so it does not read as stuck.
    # The pause is stamped on the database clock; a web machine's clock a second off only moves the count.
    paused = audit.site_paused_until
    if audit.phase == Audit.Phase.CRAWLING and paused is not None and paused > now:
        numbers["paused"] = timedelta(seconds=math.ceil((paused - now).total_seconds()))

    remaining = max(target - crawled, 0)
    if audit.phase == Audit.Phase.CRAWLING and target and not remaining:
        # Pages done; the crawl is open only for resource and external checks.
        left = checks_left(audit)
        if left["total"]:
            numbers["checks_left"] = left
            if check_rate > 0:
                numbers["eta"] = timedelta(seconds=round(left["total"] / check_rate))
            return numbers
    if remaining and page_rate > 0 and audit.phase in (Audit.Phase.STARTING, Audit.Phase.CRAWLING):
        numbers["eta"] = timedelta(seconds=round(remaining / page_rate))
    return numbers


def checks_left(audit: Audit) -> dict:
    """Resource and external checks not done yet, by kind: pending and leased frontier rows.

    Two counts, one per state, so each reads its own partial index
    (frontier_lease_order, frontier_audit_chunk) and only the rows still to do.
    """
    counts = {Page.Kind.EXTERNAL: 0, Page.Kind.RESOURCE: 0}
    for state in (FrontierURL.State.PENDING, FrontierURL.State.LEASED):
        rows = (FrontierURL.objects.filter(audit=audit, state=state).exclude(kind=Page.Kind.PAGE)
                .values("kind").annotate(n=Count("id")).order_by())
        for row in rows:
            counts[row["kind"]] = counts.get(row["kind"], 0) + row["n"]
    return {"external": counts[Page.Kind.EXTERNAL], "resource": counts[Page.Kind.RESOURCE],
            "total": sum(counts.values())}


def phase_label(audit: Audit) -> str:
    """The phase as a person reads it; an ended audit's says that it ended and where."""
    if audit.status == Audit.Status.COMPLETED:
        return "Done"
    if audit.status in (Audit.Status.CANCELLED, Audit.Status.FAILED):
        where = STOPPED_IN.get(audit.failed_phase or audit.phase, "")
        return f"{audit.get_status_display()} {where}".strip()
    return audit.get_phase_display()


def stop_note(audit: Audit, now=None) -> str:
    """Who cancelled the audit and when, in one sentence ("Cancelled by alice at 10:42; …")."""
    who = (audit.error_detail or "Cancelled").strip().rstrip(".")
    when = ""
    if audit.finished_at:
        local = timezone.localtime(audit.finished_at)
        today = timezone.localtime(now or timezone.now()).date()
        when = f" at {local:%H:%M}" if local.date() == today else f" on {local:%Y-%m-%d} at {local:%H:%M}"
    return f"{who}{when}; everything crawled before is kept."

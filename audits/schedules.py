"""A site's schedule as django-q2's own Schedule row, and what a fire of it does.

One Schedule per scheduled site, named ``site-<id>``, of django-q2's cron type:
the cluster's scheduler fires it and keeps it across restarts; nothing here
loops or sleeps. django-q2 reads a cron expression in the deployment's
TIME_ZONE, a site in its owner's zone, so each fire sets the row's next run from
the site's zone and a fire that is not one of the site's run times starts nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from .models import Audit, Site, SkippedRun
from .services import (
    QuotaExceeded,
    SourceGone,
    create_audit,
    follow_up_fields,
    lock_site,
    private_targets_allowed,
)

log = logging.getLogger(__name__)

FUNC = "audits.tasks.scheduled_run"
# django-q2 passes the run time the schedule fired for under this keyword.
DUE_KWARG = "due"


def saved(site: Site, changed: Iterable[str]) -> None:
    """A site whose schedule and alerts a person saved (``changed``: the fields they changed), on its page or
    in the admin: a new webhook address gets a new signing key, and new run times a schedule set anew."""
    changed = frozenset(changed)
    if "webhook_url" in changed and site.webhook_url:
        site.renew_webhook_key()  # the receiver it moved away from cannot sign for the new one
    sync(site, reset=not Site.RUN_TIME_FIELDS.isdisjoint(changed))


def sync(site: Site, *, reset: bool = True) -> Schedule | None:
    """Create, change or delete the site's Schedule row so it matches the site.

    ``reset=False`` says the run times did not change (no field of
    ``Site.RUN_TIME_FIELDS`` did): an existing row keeps its next run, even one
    past that a cluster down overnight has yet to fire late, and the run times
    since the schedule was last set still count as missed.
    """
    if not site.is_scheduled:
        Schedule.objects.filter(name=site.schedule_name).delete()
        site.drop_held_runs()
        return None
    _drop_twins(site.schedule_name)
    schedule, created = Schedule.objects.update_or_create(
        name=site.schedule_name,
        defaults={
            "func": FUNC, "args": repr(site.pk), "schedule_type": Schedule.CRON, "cron": site.cron_expression(),
            "repeats": -1, "intended_date_kwarg": DUE_KWARG,
        },
    )
    if created or reset:
        # Set apart from the save: Schedule.save() computes a new cron row's first
        # run in TIME_ZONE, not in the site's zone.
        schedule.next_run = next_run(site)
        Schedule.objects.filter(pk=schedule.pk).update(next_run=schedule.next_run)
        now = timezone.now()
        # A row made anew is a schedule going live (set, or resumed): its runs start a series of their own.
        Site.objects.filter(pk=site.pk).update(schedule_set_at=now, **({"scheduled_since": now} if created else {}))
    return schedule


def _drop_twins(name: str) -> int:
    """Keep one Schedule row of ``name``: django-q2's name is not unique, so a save and a watchdog's heal (or two
    watchdogs) at once can each insert one; the second would fire every run twice and fail the next save."""
    rows = list(Schedule.objects.filter(name=name).order_by("pk").values_list("pk", flat=True))
    return Schedule.objects.filter(pk__in=rows[1:]).delete()[0] if len(rows) > 1 else 0


def next_run(site: Site, moment: datetime | None = None) -> datetime:
    """The site's first run after ``moment`` (default now), leaving out a repeated wall time's second pass."""
    run = site.next_run_after(moment)
    while repeated_wall_time(site, run):
        run = site.next_run_after(run)
    return run


def repeated_wall_time(site: Site, moment: datetime) -> bool:
    """Whether ``moment`` is the second pass of a local time the clocks went back over, for fixed hours.

    A daily 02:30 in a zone whose clocks go back at 03:00 matches twice that
    night; like cron, a schedule at fixed hours runs at the first pass only,
    while one with a wildcard hour runs every real hour.
    """
    fields = site.cron_expression().split()
    if len(fields) < 2 or "*" in fields[1]:
        return False
    local = moment.astimezone(site.zone())
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def remove(site_id: int) -> None:
    Schedule.objects.filter(name=f"site-{site_id}").delete()


def heal() -> list[str]:
    """Recreate the Schedule of every scheduled site that has lost it; drop the rows no site wants.

    A row can vanish outside our code (deleted in django-q2's admin, a restored
    backup); the watchdog calls this at every pass.
    """
    actions = []
    present = set(Schedule.objects.filter(func=FUNC).values_list("name", flat=True))
    wanted = set()
    for site in Site.objects.scheduled():
        wanted.add(site.schedule_name)
        if twins := _drop_twins(site.schedule_name):
            actions.append(f"removed {twins} second schedule(s) of site {site.pk}")
        if site.schedule_name not in present:
            sync(site)
            actions.append(f"recreated the schedule of site {site.pk}")
    stale = Schedule.objects.filter(func=FUNC).exclude(name__in=wanted)
    if removed := stale.delete()[0]:
        actions.append(f"removed {removed} schedule(s) of sites unscheduled or gone")
    return actions


def run_due(site_id: int, due: str | None = None) -> str:
    """A fire of the site's schedule: start an audit, or record why none started.

    Never piles audits up: while the site's previous audit is queued or running
    the run is skipped (and recorded). The site's row lock (PostgreSQL; SQLite
    serialises writers anyway) makes two fires at once start one audit, and
    ``Site.last_due_at`` makes a fire delivered twice (django-q2 delivers at least
    once), even after its audit ended, start or skip once.
    """
    site = Site.objects.select_related("owner").filter(pk=site_id).first()
    if site is None:
        remove(site_id)
        return f"site {site_id} is gone"
    if not site.is_scheduled:
        return f"site {site_id} is not scheduled"
    now = timezone.now()
    due_at = _parse(due) or now
    Schedule.objects.filter(name=site.schedule_name).update(next_run=next_run(site, max(now, due_at)))
    if not site.is_run_time(due_at) or repeated_wall_time(site, due_at):
        return f"{due_at.isoformat()} is not a run time of site {site_id} in {site.time_zone}"
    if not site.owner.is_active:
        # A deactivated account is how an operator stops a person: their schedules stop with it. The fire
        # still counts as handled, or a reactivated account's next fire would list these as missed.
        Site.objects.filter(Q(last_due_at__lt=due_at) | Q(last_due_at__isnull=True), pk=site.pk).update(
            last_due_at=due_at)
        return f"site {site_id}: its owner's account is deactivated"
    with transaction.atomic():
        # From here on only the locked row counts: a pause or a delete between the first read and the lock
        # must stop this fire, and the audit takes the site's settings as they are now.
        site = lock_site(site)
        if site is None:
            return f"site {site_id} is gone"
        if not site.is_scheduled:
            return f"site {site_id} is not scheduled"
        if site.last_due_at is not None and due_at <= site.last_due_at:
            return f"the run of site {site_id} at {due_at.isoformat()} was already handled"
        Site.objects.filter(pk=site.pk).update(last_due_at=due_at)
        SkippedRun.objects.bulk_create(_missed(site, due_at, now))
        if site.audits.filter(status__in=Audit.ACTIVE).exists():
            return _skip(site, due_at, SkippedRun.Reason.STILL_RUNNING)
        if not private_targets_allowed(site):
            return _skip(site, due_at, SkippedRun.Reason.PRIVATE_REFUSED)
        try:
            audit = _start(site)
        except QuotaExceeded as exc:
            return _skip(site, due_at, SkippedRun.Reason.QUOTA, f"{exc} It starts as soon as one of them ends.")
    return f"started audit {audit.pk} of site {site_id}"


def _start(site: Site) -> Audit:
    """The scheduled audit of ``site``, queued; QuotaExceeded when its owner has as many running as allowed."""
    try:
        return create_audit(site.owner, site=site, trigger=Audit.Trigger.SCHEDULE,
                            start_url=site.start_url, **site.crawl_settings(), **_mode_fields(site))
    except SourceGone:  # the audit a delta run would reuse is being deleted: crawl in full
        return create_audit(site.owner, site=site, trigger=Audit.Trigger.SCHEDULE,
                            start_url=site.start_url, **site.crawl_settings())


# Runs the running-audit limit held back that one watchdog pass starts, at most. It tries up to twice as
# many: a run the query offers fails to start only by a race (another watchdog, a press of Run now).
WAITING_PER_TICK = 10


def start_waiting() -> list[str]:
    """Start the scheduled runs the owner's running-audit limit held back, oldest first, as slots free.

    Without this, sites sharing a run time (every daily site defaults to 03:00)
    past the limit were skipped every night, unseen. A run waits until its site's
    next run time (a later fire takes its place) or until its schedule is paused
    or unset (``sync`` drops it for good), and starts only as its fire
    would have: no audit of the site active, private targets still allowed.
    The pass counts runs started, not rows read: ``_startable`` leaves out in
    SQL the runs that cannot start now, so they never stand in front of others.
    """
    actions: list[str] = []
    tried: list[int] = []
    for _ in range(2 * WAITING_PER_TICK):
        skipped = _startable().exclude(pk__in=tried).first()
        if skipped is None:
            break
        tried.append(skipped.pk)
        if (audit := _start_held(skipped)) is not None:
            actions.append(f"started the held-back run of site {skipped.site_id} as audit {audit.pk}")
            if len(actions) == WAITING_PER_TICK:
                break
    return actions


def _startable():
    """The held-back runs that can start now, oldest first: the site's latest run time on a live schedule,
    its owner active and under the running-audit limit, no audit of the site active."""
    active = Audit.objects.filter(status__in=Audit.ACTIVE)
    at_limit = (active.values("owner").annotate(running=Count("pk"))
                .filter(running__gte=settings.SITEWARD["MAX_RUNNING_AUDITS_PER_USER"]).values("owner"))
    held = (SkippedRun.objects.waiting().filter(site__in=Site.objects.scheduled(), site__owner__is_active=True)
            .exclude(site__owner__in=at_limit).exclude(Exists(active.filter(site=OuterRef("site")))))
    if not settings.SITEWARD["ALLOW_PRIVATE_TARGETS"]:
        held = held.filter(site__allow_private=False)  # as private_targets_allowed
    return held.select_related("site").order_by("created_at", "pk")


def _start_held(skipped: SkippedRun) -> Audit | None:
    """Start the held-back run ``skipped`` as its fire would have, or None if it cannot start now."""
    try:
        with transaction.atomic():
            site = lock_site(skipped.site)
            # Claimed first, in the transaction that starts the audit: two watchdogs start it once.
            claimed = SkippedRun.objects.filter(pk=skipped.pk, reason=SkippedRun.Reason.QUOTA).update(
                reason=SkippedRun.Reason.STARTED_LATE)
            # The locked row decides, as in run_due: the site may have been paused or deleted since the read.
            if (site is None or not site.is_scheduled or not claimed or not private_targets_allowed(site)
                    or site.audits.filter(status__in=Audit.ACTIVE).exists()):
                raise _NotNow
            audit = _start(site)
            SkippedRun.objects.filter(pk=skipped.pk).update(
                detail=f"Started at {_local(site, timezone.now())} as audit {audit.pk}, "
                       "once one of the owner's audits had ended.")
    except (QuotaExceeded, _NotNow):
        return None
    return audit


# How long skipped runs are kept, and how many one watchdog pass deletes at most: an hourly site that
# keeps skipping would otherwise add 8,760 rows a year, every one listed on its admin page.
SKIPPED_KEPT = timedelta(days=90)
PRUNE_PER_TICK = 10_000


def prune_skipped() -> list[str]:
    """Delete the skipped runs older than SKIPPED_KEPT, at most PRUNE_PER_TICK a pass."""
    old = SkippedRun.objects.filter(created_at__lt=timezone.now() - SKIPPED_KEPT).order_by("pk")
    ids = list(old.values_list("pk", flat=True)[:PRUNE_PER_TICK])
    deleted = SkippedRun.objects.filter(pk__in=ids).delete()[0] if ids else 0
    return [f"deleted {deleted} skipped run(s) older than {SKIPPED_KEPT.days} days"] if deleted else []


class _NotNow(Exception):
    """The held-back run cannot start now: rolled back, it stays waiting."""


def _mode_fields(site: Site) -> dict:
    """A delta site's run reuses its last completed audit; its first run, with none, is a full crawl."""
    if site.scheduled_mode != Audit.Mode.DELTA:
        return {}
    last = Audit.comparable().filter(site=site).order_by("-pk").first()
    return follow_up_fields(last, Audit.Mode.DELTA) if last else {}


# Missed run times a fire records one by one; after them, the last says the rest were missed too.
MISSED_RECORDED = 50
# Run times a fire looks through for missed ones, at most: a year of an hourly schedule.
MISSED_SCAN = 9000


def _missed(site: Site, due_at: datetime, skipped_to: datetime) -> list[SkippedRun]:
    """The run times of the schedule, as set now, that no fire came or will come for, not yet recorded.

    django-q2 queues every fire on time while a cluster's scheduler runs; with
    catch_up off, one that comes back after an outage fires the oldest run time
    it missed once and moves the row past the rest, and a fire moves the row past
    ``skipped_to`` (now) itself. So a fire records the run times between the last
    fire handled and its own (one still queued behind it will find its run time
    handled already), and those after its own up to ``skipped_to`` that have no
    fire queued: a fire run late by a busy queue has its successors queued, and
    they are no gap. Nothing before the schedule was last set counts (another
    cadence, a pause). Past MISSED_RECORDED rows the last says the rest were
    missed too, and a later fire may list those.
    """
    since = max(site.last_due_at or due_at, site.schedule_set_at or due_at)
    # Compared in UTC: in the hour a clock is set back, a local time equals no other zone's (PEP 495).
    due_at, skipped_to = due_at.astimezone(UTC), skipped_to.astimezone(UTC)
    recorded = set(SkippedRun.objects.filter(site=site, reason=SkippedRun.Reason.MISSED, due_at__gt=since)
                   .values_list("due_at", flat=True))
    queued: set[datetime] | None = None  # read once a run time after this fire's comes up
    missed = []
    moment = next_run(site, since).astimezone(UTC)
    for _ in range(MISSED_SCAN):
        if moment >= skipped_to or len(missed) == MISSED_RECORDED:
            break
        if moment < due_at:
            detail = f"No fire came between {_local(site, since)} and {_local(site, due_at)}."
        elif moment > due_at:
            if queued is None:
                queued = _queued_runs(site)
            detail = "" if moment in queued else (
                f"The scheduler caught up with the run at {_local(site, due_at)} and passed this one.")
        else:
            detail = ""  # this fire's own
        if detail and moment not in recorded:
            missed.append(SkippedRun(site=site, due_at=moment, reason=SkippedRun.Reason.MISSED, detail=detail))
        moment = next_run(site, moment).astimezone(UTC)
    if len(missed) == MISSED_RECORDED and moment < skipped_to:
        missed[-1].detail += f" Every run time from this one to {_local(site, skipped_to)} was missed too."
    return missed


def _queued_runs(site: Site) -> set[datetime]:
    """The run times of the site's fires waiting in (or taken from, not yet acknowledged by) the ORM broker."""
    runs = set()
    for row in OrmQ.objects.all():
        if row.task.get("group") == site.schedule_name:
            when = _parse((row.task.get("kwargs") or {}).get(DUE_KWARG))
            if when is not None:
                runs.add(when.astimezone(UTC))
    return runs


def _local(site: Site, moment: datetime) -> str:
    return moment.astimezone(site.zone()).strftime("%Y-%m-%d %H:%M %Z")


def _skip(site: Site, due_at: datetime, reason: str, detail: str = "") -> str:
    SkippedRun.objects.create(site=site, due_at=due_at, reason=reason, detail=detail[:500])
    log.info("site %s: scheduled run at %s skipped: %s", site.pk, due_at, reason)
    return f"skipped the run of site {site.pk}: {reason}"


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, timezone.get_default_timezone())


def scheduled_sites_left(owner, site: Site | None = None) -> int:
    """How many more sites ``owner`` may schedule (``site`` itself does not count against it)."""
    taken = Site.objects.filter(owner=owner).scheduled()
    if site is not None and site.pk:
        taken = taken.exclude(pk=site.pk)
    return settings.SITEWARD["MAX_SCHEDULED_SITES_PER_USER"] - taken.count()

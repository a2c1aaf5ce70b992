"""The watchdog: a django-q2 Schedule, at every scheduler pass (30 s), that reconciles crawl state.

It is the only place that re-enqueues work. It looks for what no exception handler
can see: a worker killed mid-chunk (its lease expired), a task lost between a
commit and its enqueue, a queue row dropped for a bad signature, an audit that
made no progress for too long. Every action is a conditional UPDATE first, so two
watchdogs running at once (two clusters) act once.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.db.models.functions import Now
from django.utils import timezone
from django_q.models import OrmQ

from . import inlinks, notify, schedules
from .crawl.progress import abandon_chunk, advance, has_work, retry_wait, site_pause
from .dispatch import Dispatcher
from .models import Audit, ChunkLease, Site
from .services import crawl_queue, enqueue

log = logging.getLogger(__name__)

# Link-index builds enqueued a tick. Two watchdogs may both enqueue one audit's;
# the build is idempotent (inlinks.build), so the second does nothing.
INDEX_PER_TICK = 5
# Audits whose alerts are sent a tick, at most (each send has its own timeout).
NOTIFY_PER_TICK = 20
# Deletions enqueued again a tick; one running twice at once only deletes the same batches.
PURGE_PER_TICK = 5


def queued_task_names() -> set[str]:
    """Names of tasks waiting in (or taken from, not yet acknowledged by) the ORM broker."""
    return broker_tasks()[0]


def broker_tasks() -> tuple[set[str], set[str]]:
    """One read of the ORM broker: the names of its tasks (waiting, or taken and not yet
    acknowledged), and of those a cluster took over a lease's length ago with no copy waiting.

    django-q2 stamps a taken task's lock at the take plus Q_RETRY, and hands it out
    again only once that passes; both times are this machine's clock, as django-q2's are.
    """
    now = timezone.now()
    taken_by = now + timedelta(seconds=settings.Q_CLUSTER["retry"] - settings.SITEWARD["LEASE_SECONDS"])
    waiting, taken_long_ago, names = set(), set(), set()
    for row in OrmQ.objects.all():
        name = row.name()
        if not name:
            continue
        names.add(name)
        if row.lock is None or row.lock <= now:
            waiting.add(name)
        elif row.lock < taken_by:
            taken_long_ago.add(name)
    return names, taken_long_ago - waiting


def run_watchdog(now=None) -> str:
    """One pass. ``now`` is a time on the database clock (tests simulate time with it); by default the database's.

    Heartbeats and leases are stamped by the database clock, so this machine's
    clock, which may be skewed or jump, decides nothing here.
    """
    conf = settings.SITEWARD
    stall = timedelta(seconds=conf["STALL_SECONDS"])
    grace = timedelta(seconds=conf["WATCHDOG_GRACE_SECONDS"])
    queue_wait = timedelta(seconds=conf["QUEUE_WAIT_SECONDS"])
    names, orphaned = broker_tasks()
    dispatcher = Dispatcher()
    actions: list[str] = []
    for audit in Audit.objects.filter(status__in=Audit.ACTIVE).annotate(db_now=Now()).order_by("id"):
        at = now or audit.db_now
        last = audit.heartbeat_at or audit.created_at
        idle = at - last
        if idle > stall and not _waiting_on_retry_after(audit):
            waiting = _waiting_for_worker(audit, names)
            if not waiting or idle > queue_wait:
                why = (f"No worker took its next task in {int(idle.total_seconds()) // 3600} h: is a worker cluster "
                       f"serving the {crawl_queue(audit) or 'crawl'} queue running?" if waiting else
                       f"No progress for {int(idle.total_seconds())} s (limit {conf['STALL_SECONDS']} s).")
                if audit.fail(Audit.ErrorCode.STALLED, why, quiet=True):
                    actions.append(f"failed {audit.pk}: stalled")
                continue
        if audit.status == Audit.Status.RUNNING and audit.phase == Audit.Phase.CRAWLING:
            actions.extend(_reconcile_chunks(audit, names, orphaned, at, grace, dispatcher))
            continue
        if idle <= grace:
            continue
        # Queued, starting or finalizing with no task to carry it on: enqueue it again.
        if audit.status == Audit.Status.QUEUED or audit.phase == Audit.Phase.STARTING:
            kind = "resume" if audit.origin else "start"
            if not ({f"audit-{audit.pk}-start", f"audit-{audit.pk}-resume"} & names) and audit.claim_for_watchdog():
                with transaction.atomic():
                    enqueue(f"audits.tasks.{kind}", audit.pk, name=f"audit-{audit.pk}-{kind}",
                            queue=crawl_queue(audit))
                actions.append(f"re-enqueued {kind} of {audit.pk}")
        elif audit.status == Audit.Status.FINALIZING:
            if f"audit-{audit.pk}-finalize" not in names and audit.claim_for_watchdog():
                with transaction.atomic():
                    dispatcher.finalize(audit.pk)
                actions.append(f"re-enqueued finalize of {audit.pk}")
    # An ended audit's edges are final (a failed or cancelled one's once its
    # leases run out): index them by target, so its pages' "linked from" lists
    # need no scan, and give a failed or cancelled one's issues the review marks
    # and ignore rules finalize would have. The finalize task enqueues this for
    # the audits it completes; here it catches the rest (failed, cancelled,
    # finished by the command line, or an enqueue lost). A task, not here: a big
    # audit's build takes seconds.
    actions.extend(_enqueue_each(inlinks.ended_unindexed(), INDEX_PER_TICK, "index_links", "index-links",
                                 "the link index", names))
    # Sites whose Schedule row vanished get it back; alerts whose task died mid-send,
    # and alerts waiting to be sent again that no longer can be, are recorded failed
    # (before the sweep, which lists only what can still be sent); scheduled audits
    # that ended without their alerts (a failure anywhere, a lost enqueue) get them.
    # Audits and sites a person deleted whose deletion task was lost (a worker killed in it): again.
    actions.extend(_enqueue_each(Audit.objects.filter(deleting=True, site__deleting=False), PURGE_PER_TICK,
                                 "purge_audit", "purge", "the deletion", names))
    actions.extend(_enqueue_each(Site.objects.filter(deleting=True), PURGE_PER_TICK, "purge_site", "purge",
                                 "the deletion", names))
    actions.extend(schedules.heal())
    actions.extend(schedules.start_waiting())
    actions.extend(schedules.prune_skipped())
    actions.extend(notify.fail_stuck())
    actions.extend(notify.give_up_unsendable())
    actions.extend(_enqueue_each(notify.retry_audits(), NOTIFY_PER_TICK, "send_notifications", "notify",
                                 "the alerts tried again", names, order=("first_due", "id")))
    actions.extend(_enqueue_each(notify.due_audits(), NOTIFY_PER_TICK, "send_notifications", "notify",
                                 "the notifications", names))
    if actions:
        log.info("watchdog: %s", "; ".join(actions))
    return "; ".join(actions) or "nothing to do"


def _enqueue_each(rows, limit: int, task: str, suffix: str, what: str, names: set[str],
                  order: tuple[str, ...] = ("id",)) -> list[str]:
    """Enqueue ``task`` for the first ``limit`` of ``rows`` (audits, or sites; by ``order``) that have none queued
    already."""
    kind = "site" if rows.model is Site else "audit"
    actions = []
    # Rows whose task still waits take none of the budget, or a busy cluster's backlog would hold it
    # every tick and the rows after it never be enqueued; at most len(names) of them are passed over.
    for pk in rows.order_by(*order).values_list("pk", flat=True)[:limit + len(names)]:
        name = f"{kind}-{pk}-{suffix}"
        if name in names:
            continue
        with transaction.atomic():
            enqueue(f"audits.tasks.{task}", pk, name=name)
        actions.append(f"enqueued {what} of {'site ' if kind == 'site' else ''}{pk}")
        if len(actions) == limit:
            break
    return actions


# Tasks that carry an audit's crawl forward (not the link index or the alerts, which run after it).
_CRAWL_STEPS = ("start", "resume", "chunk-", "finalize")


def _waiting_for_worker(audit: Audit, names: set[str]) -> bool:
    """The audit's next step is a task still in the queue: a busy cluster, not a stalled audit.

    Its wait ends when a worker takes the task (and the claim beats), or when
    the task is lost, which the reconciliation below finds by name.
    """
    prefix = f"audit-{audit.pk}-"
    return any(name.startswith(prefix) and name[len(prefix):].startswith(_CRAWL_STEPS) for name in names)


def _waiting_on_retry_after(audit: Audit) -> bool:
    """Crawling, no chunk open, and rate-limited URLs pending or the site's pause running: quiet because
    the site asked.

    Nothing can be stuck (no chunk runs) and this watchdog starts the next
    chunk once a URL is due or the pause is over, so the quiet is not a stall,
    however long the heartbeat is. It is bounded: each wait is at most the
    reschedule cap, each URL waits at most MAX_RESCHEDULES times, and a pause
    is only stored for an answer the site gave a request.
    """
    return (audit.status == Audit.Status.RUNNING and audit.phase == Audit.Phase.CRAWLING
            and not ChunkLease.objects.open_for(audit.pk).exists()
            and (retry_wait(audit) is not None or site_pause(audit) > 0))


def _reconcile_chunks(audit: Audit, names: set[str], orphaned: set[str], now, grace,
                      dispatcher: Dispatcher) -> list[str]:
    """Lost, dead and finished chunks of a crawling audit; ``now`` is this pass's time on the database clock.

    ``names``: the broker's tasks; ``orphaned``: those a cluster took and died holding (``broker_tasks``).
    """
    actions = []
    max_attempts = settings.SITEWARD["MAX_CHUNK_ATTEMPTS"]
    # 1. Expired leases: a worker died (or hung past its lease). Re-enqueue while
    #    attempts remain (the claim counts the attempt), else give the URLs up.
    for lease in audit.chunks.filter(state=ChunkLease.State.LEASED, leased_until__lt=Now()):
        if lease.attempts >= max_attempts:
            if abandon_chunk(lease, dispatcher):
                actions.append(f"abandoned chunk {lease.number} of {audit.pk} after {lease.attempts} attempts")
            continue
        with transaction.atomic():
            if lease.reopen(now):
                dispatcher.chunk(audit.pk, lease.number, crawl_queue(audit))
                actions.append(f"re-enqueued chunk {lease.number} of {audit.pk} (attempt {lease.attempts + 1})")
    # 2. Chunks queued long ago whose task vanished (bad signature, lost enqueue), and
    #    chunks whose task a cluster took a lease's length ago without claiming them: a
    #    worker claims its chunk as it starts, so that cluster died in between, and
    #    django-q2 would hand the task out again only after Q_RETRY. A second task for
    #    a chunk is harmless: the claim lets one run.
    for lease in audit.chunks.filter(state=ChunkLease.State.QUEUED):
        name = f"audit-{audit.pk}-chunk-{lease.number}"
        if name not in orphaned and (lease.created_at >= now - grace or name in names):
            continue
        with transaction.atomic():
            if lease.requeue(now):
                dispatcher.chunk(audit.pk, lease.number, crawl_queue(audit))
                actions.append(f"re-enqueued lost chunk {lease.number} of {audit.pk}")
    # 3. Every chunk finished but nothing scheduled the next step: advance now.
    #    Either rate-limited URLs waited for their Retry-After, or everything
    #    waited for the site's pause to end (the last chunk could not schedule
    #    a task for later), and that is over, which needs no grace; or a crash
    #    came between the commit and the enqueue.
    if ChunkLease.objects.open_for(audit.pk).exists():
        return actions
    with transaction.atomic():  # near max_pages has_work locks the audit's row, which needs a transaction
        wait = retry_wait(audit)
        if (wait is not None and wait > 0 and not has_work(audit)) or site_pause(audit) > 0:
            return actions  # still waiting as the site asked
    last_beat = audit.heartbeat_at or audit.created_at
    # A pause that ended since the last beat is what the audit was quiet for.
    paused = audit.site_paused_until is not None and audit.site_paused_until > last_beat
    if (wait is not None or paused or now - last_beat > grace) and audit.claim_for_watchdog():
        last = audit.chunks.aggregate(n=Max("number"))["n"] or 0
        with transaction.atomic():
            advance(audit, last, dispatcher)
        actions.append(f"advanced {audit.pk} after chunk {last}")
    return actions

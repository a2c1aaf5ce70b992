"""The watchdog finds what no exception handler sees, and acts once even when run twice at once."""

import sqlite3
import subprocess
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone
from django_q.models import OrmQ

from audits import tasks
from audits.crawl.chunk import claim, lease_items, run_chunk
from audits.crawl.start import run_start
from audits.dispatch import Dispatcher, InlineDispatcher
from audits.inline import run_audit_inline
from audits.models import Audit, ChunkLease, Inlink
from audits.watchdog import queued_task_names, run_watchdog
from tests.conftest import MANAGE, subprocess_env, wait_for
from tests.factories import make_audit

from .grid_site import GridSite

pytestmark = pytest.mark.django_db(transaction=True)


def crawling_audit(owner, site) -> Audit:
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True)
    run_start(audit.pk, InlineDispatcher())
    audit.refresh_from_db()
    return audit


def age(audit: Audit, seconds: int) -> None:
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_a_live_audit_is_left_alone(owner, grid_site, fast_settings):
    audit = crawling_audit(owner, grid_site)
    claim(audit.pk, 1)
    OrmQ.objects.all().delete()
    assert run_watchdog() == "nothing to do"
    audit.refresh_from_db()
    assert audit.status == "running" and not OrmQ.objects.exists()


def test_an_audit_without_progress_is_failed_as_stalled_keeping_its_pages(owner, grid_site, fast_settings):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "STALL_SECONDS": 60}
    audit = crawling_audit(owner, grid_site)
    age(audit, 61)
    run_watchdog()
    audit.refresh_from_db()
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "stalled", "crawling")
    assert "No progress" in audit.error_detail
    assert audit.pages.count() >= 1  # the start page crawled before it stalled is still there


def test_an_expired_lease_is_re_enqueued_once_when_two_watchdogs_run_at_once(owner, grid_site, fast_settings):
    audit = crawling_audit(owner, grid_site)
    held = claim(audit.pk, 1)  # a worker takes chunk 1 and dies
    lease_items(audit, held)
    ChunkLease.objects.filter(pk=held.pk).update(leased_until=timezone.now() - timedelta(seconds=5))
    OrmQ.objects.all().delete()
    barrier = threading.Barrier(2)
    outputs = []

    def watchdog():
        try:
            barrier.wait()
            outputs.append(run_watchdog())
        finally:
            connection.close()

    threads = [threading.Thread(target=watchdog) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(queued_task_names()) == [f"audit-{audit.pk}-chunk-1"]
    assert sum("re-enqueued chunk 1" in out for out in outputs) == 1
    # The re-delivered chunk claims with the attempt counted and finishes the URLs it held.
    assert run_chunk(audit.pk, 1, InlineDispatcher()) == "done"
    assert ChunkLease.objects.get(audit=audit, number=1).attempts == 2


def test_a_queued_audit_whose_task_vanished_is_started_again(owner, grid_site, fast_settings):
    audit = make_audit(owner, start_url=grid_site.url("/"), allow_private=True)
    age(audit, 10)  # its start task was dropped (say, a rotated SECRET_KEY failed its signature)
    assert not OrmQ.objects.exists()
    run_watchdog()
    assert queued_task_names() == {f"audit-{audit.pk}-start"}
    run_watchdog()  # the task is queued now: no second copy
    assert OrmQ.objects.count() == 1


def test_a_finished_chunk_with_nothing_scheduled_after_it_is_advanced(owner, grid_site, fast_settings):
    audit = crawling_audit(owner, grid_site)
    run_chunk(audit.pk, 1, InlineDispatcher())
    ChunkLease.objects.filter(audit=audit, number=2).delete()  # the enqueue of chunk 2 was lost in a crash
    OrmQ.objects.all().delete()
    age(audit, 10)
    run_watchdog()
    assert queued_task_names() == {f"audit-{audit.pk}-chunk-2"}


def test_a_finalizing_audit_without_its_task_gets_finalize_again(owner, grid_site, fast_settings):
    audit = crawling_audit(owner, grid_site)
    Audit.objects.filter(pk=audit.pk).update(status="finalizing", phase="finalizing")
    OrmQ.objects.all().delete()
    age(audit, 10)
    run_watchdog()
    assert queued_task_names() == {f"audit-{audit.pk}-finalize"}


def test_a_failed_audit_gets_its_links_indexed_once_no_chunk_can_still_write(owner, grid_site, fast_settings):
    audit = crawling_audit(owner, grid_site)
    claim(audit.pk, 1)  # a live lease: that chunk may still write one sub-batch
    audit.fail(Audit.ErrorCode.INTERNAL_ERROR, "boom")
    OrmQ.objects.all().delete()
    run_watchdog()
    assert f"audit-{audit.pk}-index-links" not in queued_task_names()

    ChunkLease.objects.filter(audit=audit).update(leased_until=timezone.now() - timedelta(seconds=1))
    run_watchdog()
    run_watchdog()  # not enqueued twice while the first is queued
    assert [row.name() for row in OrmQ.objects.all()] == [f"audit-{audit.pk}-index-links"]

    assert tasks.index_links(audit.pk) == "indexed"
    audit.refresh_from_db()
    assert audit.links_indexed and Inlink.objects.filter(audit=audit).count() == audit.links.count() > 0
    OrmQ.objects.all().delete()
    run_watchdog()
    assert not OrmQ.objects.exists()


def test_a_completed_audit_without_its_link_index_gets_it_from_the_watchdog(owner, grid_site, fast_settings):
    # The command line completes audits with no cluster to hand the build to.
    audit = crawling_audit(owner, grid_site)
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE)
    OrmQ.objects.all().delete()
    run_watchdog()
    assert [row.name() for row in OrmQ.objects.all()] == [f"audit-{audit.pk}-index-links"]
    assert tasks.index_links(audit.pk) == "indexed"
    assert Inlink.objects.filter(audit=audit).count() == audit.links.count() > 0


def test_the_watchdog_schedule_is_created_once_by_migration_and_is_due_at_every_scheduler_pass():
    from django_q.models import Schedule

    schedule = Schedule.objects.get(name="siteward-watchdog")
    assert (schedule.func, schedule.schedule_type, schedule.repeats) == ("audits.tasks.watchdog", Schedule.CRON, -1)
    assert Schedule.objects.filter(func="audits.tasks.watchdog").count() == 1
    # django-q2's scheduler looks every 30 s: the next run is never further away than that.
    now = timezone.now()
    assert timedelta(0) < schedule.calculate_next_run() - now <= timedelta(seconds=15)


def test_an_older_deployments_every_minute_watchdog_schedule_is_corrected_at_migrate():
    from django_q.models import Schedule

    from audits.apps import ensure_watchdog_schedule

    Schedule.objects.filter(name="siteward-watchdog").update(schedule_type=Schedule.MINUTES, minutes=1, cron=None)
    ensure_watchdog_schedule()
    schedule = Schedule.objects.get(name="siteward-watchdog")
    assert (schedule.schedule_type, schedule.minutes) == (Schedule.CRON, None)


def test_migrating_the_audits_app_alone_on_a_fresh_database_works_and_a_full_migrate_adds_the_schedule(tmp_path):
    db = tmp_path / "fresh.sqlite3"
    env = subprocess_env(DATABASE_URL=f"sqlite:///{db}", SITEWARD_VAR_DIR=str(tmp_path))
    alone = subprocess.run([*MANAGE, "migrate", "audits", "-v", "0"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert alone.returncode == 0, alone.stderr[-2000:]
    full = subprocess.run([*MANAGE, "migrate", "-v", "0"], env=env, capture_output=True, text=True, timeout=120)
    assert full.returncode == 0, full.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT func FROM django_q_schedule WHERE name = 'siteward-watchdog'").fetchall()
    assert rows == [("audits.tasks.watchdog",)]


def queued_chunk(owner, site) -> Audit:
    """A crawling audit whose chunk 1 was enqueued and sits in the queue, no worker having taken it."""
    audit = crawling_audit(owner, site)
    with transaction.atomic():
        Dispatcher().chunk(audit.pk, 1)
    return audit


def test_an_audit_whose_next_task_waits_in_a_busy_queue_is_not_failed_as_stalled(owner, grid_site, fast_settings):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "STALL_SECONDS": 60}
    audit = queued_chunk(owner, grid_site)  # behind other audits' chunks
    age(audit, 600)
    run_watchdog()
    audit.refresh_from_db()
    assert audit.status == "running" and audit.error_code == ""

    OrmQ.objects.all().delete()  # the task is lost: now nothing carries the audit on
    run_watchdog()
    audit.refresh_from_db()
    assert (audit.status, audit.error_code) == ("failed", "stalled")


def test_an_audit_whose_task_no_worker_takes_for_hours_fails_saying_no_cluster_serves_its_queue(
        owner, grid_site, fast_settings):
    # A rendered audit with no render cluster: its task waits forever, and a schedule would skip every
    # later run as "still running", alerting nobody.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "STALL_SECONDS": 60, "QUEUE_WAIT_SECONDS": 3600}
    audit = queued_chunk(owner, grid_site)
    age(audit, 3000)
    run_watchdog()
    audit.refresh_from_db()
    assert audit.status == "running"
    age(audit, 3 * 3600)
    run_watchdog()
    audit.refresh_from_db()
    assert (audit.status, audit.error_code) == ("failed", "stalled")
    assert audit.error_detail == "No worker took its next task in 3 h: is a worker cluster serving the crawl queue running?"


def taken(seconds_ago: float) -> None:
    """Every task in the broker taken by a cluster ``seconds_ago``, as django-q2's ORM broker stamps it."""
    from django.conf import settings
    OrmQ.objects.update(lock=timezone.now() + timedelta(seconds=settings.Q_CLUSTER["retry"] - seconds_ago))


def test_a_chunk_whose_task_a_dead_cluster_took_is_enqueued_again_without_waiting_for_q_retry(
        owner, grid_site, fast_settings):
    audit = crawling_audit(owner, grid_site)
    assert ChunkLease.objects.get(audit=audit, number=1).state == ChunkLease.State.QUEUED
    OrmQ.objects.all().delete()
    with transaction.atomic():
        Dispatcher().chunk(audit.pk, 1, None)
    taken(seconds_ago=1)  # a live worker is about to claim it
    assert run_watchdog() == "nothing to do"
    taken(seconds_ago=fast_settings.SITEWARD["LEASE_SECONDS"] + 1)  # its cluster died before the claim
    assert f"re-enqueued lost chunk 1 of {audit.pk}" in run_watchdog()
    waiting = OrmQ.objects.filter(lock__lte=timezone.now())
    assert [row.name() for row in waiting] == [f"audit-{audit.pk}-chunk-1"]
    run_watchdog()  # a copy waits to be taken: no third one
    assert OrmQ.objects.count() == 2
    assert run_chunk(audit.pk, 1, InlineDispatcher()) == "done"


def test_a_slow_start_run_in_process_beats_so_the_watchdog_takes_it_for_no_lost_one(owner, fast_settings):
    # The audit command runs the start in-process: no task in the broker stands for it, only its heartbeat.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "WATCHDOG_GRACE_SECONDS": 1}
    passes = []
    with GridSite(pages=1, delay=1.0) as slow:
        audit = make_audit(owner, start_url=slow.url("/"), allow_private=True, max_pages=5)

        def watch():
            try:
                wait_for(lambda: slow.hits("/") > 0, 10, interval=0.05)  # robots.txt answered, the page asked
                time.sleep(1.5)  # past the grace, still fetching (the sitemaps and the probes come next)
                passes.append((Audit.objects.get(pk=audit.pk).phase, run_watchdog()))
            finally:
                connections.close_all()

        watcher = threading.Thread(target=watch)
        watcher.start()
        run_audit_inline(audit.pk)
        watcher.join(30)
    assert passes == [(Audit.Phase.STARTING, "nothing to do")]
    assert not OrmQ.objects.exists()
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)

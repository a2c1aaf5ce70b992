"""Heartbeats and the watchdog go by the database clock, as leases do.

Several clusters on several machines share one database: a machine whose clock
runs ahead or behind (or jumps) must neither fail healthy audits as stalled nor
re-enqueue work that is not lost, and a heartbeat that really is old by the
database clock must still end its audit. The machine's clock is moved with
time-machine, which leaves the database's own clock (SQLite's and PostgreSQL's)
alone.
"""

import time
from datetime import timedelta

import pytest
import time_machine
from django.db.models.functions import Now
from django.utils import timezone
from django_q.models import OrmQ

from audits.models import Audit, ChunkLease
from audits.watchdog import queued_task_names, run_watchdog
from tests.factories import make_audit

pytestmark = pytest.mark.django_db(transaction=True)

# Far beyond the stall limit (900 s), so one pass by the machine's clock would fail every audit.
SKEW = timedelta(hours=2)


def machine_clock(offset: timedelta):
    """This process's clock moved by ``offset``; the database's clock is untouched."""
    return time_machine.travel(timezone.now() + offset, tick=True)


def db_now():
    return Audit.objects.annotate(db_now=Now()).values_list("db_now", flat=True).first()


def crawling_audit(owner) -> Audit:
    """A running audit with a live chunk: only a stall could end it."""
    audit = make_audit(owner)
    assert audit.start() and audit.begin_crawl("https://shop.example")
    ChunkLease.objects.create(audit=audit, number=1)
    assert ChunkLease.objects.claim(audit.pk, 1, seconds=3 * 3600, max_attempts=3)
    return audit


def stalled_by_database_clock(owner, seconds: int) -> Audit:
    audit = crawling_audit(owner)
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=Now() - timedelta(seconds=seconds))
    return audit


def state(audit: Audit) -> tuple[str, str]:
    audit.refresh_from_db()
    return audit.status, audit.error_code


@pytest.mark.parametrize("offset", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_watchdog_with_a_skewed_clock_fails_only_the_audit_whose_heartbeat_is_old_by_the_database(
        owner, fast_settings, offset):
    healthy = crawling_audit(owner)
    healthy.beat(pages_crawled=1)
    stalled = stalled_by_database_clock(owner, 901)
    assert not OrmQ.objects.exists()
    with machine_clock(offset):
        result = run_watchdog()
    assert state(healthy) == ("running", "")
    assert state(stalled) == ("failed", "stalled")
    assert result == f"failed {stalled.pk}: stalled"


def test_heartbeats_written_on_a_machine_whose_clock_is_behind_keep_the_audit_alive(owner, fast_settings):
    audit = make_audit(owner)
    with machine_clock(-SKEW):  # the worker's machine: its start, crawl and beats
        assert audit.start() and audit.begin_crawl("https://shop.example")
        ChunkLease.objects.create(audit=audit, number=1)
        assert ChunkLease.objects.claim(audit.pk, 1, seconds=3 * 3600, max_attempts=3)
        audit.beat(pages_crawled=3)
    audit.refresh_from_db()
    assert abs(audit.heartbeat_at - db_now()) < timedelta(minutes=1)
    assert run_watchdog() == "nothing to do"
    assert state(audit) == ("running", "")


def test_a_skew_above_the_grace_does_not_advance_an_audit_whose_chunk_just_ended(owner, fast_settings):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "WATCHDOG_GRACE_SECONDS": 120}
    audit = make_audit(owner)
    assert audit.start() and audit.begin_crawl("https://shop.example")
    ChunkLease.objects.create(audit=audit, number=1, state=ChunkLease.State.DONE)
    audit.beat(chunks_done=1)  # the chunk's own advance is still on its way
    with machine_clock(timedelta(minutes=10)):  # above the grace, below the stall limit
        run_watchdog()
    assert audit.pk not in {int(name.split("-")[1]) for name in queued_task_names()}
    audit.refresh_from_db()
    assert (audit.status, audit.phase) == ("running", "crawling")
    # The same quiet, long enough by the database clock, is a lost step: the watchdog advances it.
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=Now() - timedelta(seconds=121))
    with machine_clock(-timedelta(minutes=10)):
        assert run_watchdog() == f"advanced {audit.pk} after chunk 1"
    assert queued_task_names() == {f"audit-{audit.pk}-finalize"}


def test_an_explicit_now_is_a_time_on_the_database_clock(owner, fast_settings):
    audit = make_audit(owner)
    with machine_clock(-SKEW):
        assert audit.start() and audit.begin_crawl("https://shop.example")
        ChunkLease.objects.create(audit=audit, number=1)
        assert ChunkLease.objects.claim(audit.pk, 1, seconds=3 * 3600, max_attempts=3)
        audit.beat(pages_crawled=1)
    beat = db_now()
    with machine_clock(SKEW):
        assert run_watchdog(now=beat + timedelta(seconds=60)) == "nothing to do"
        assert state(audit) == ("running", "")
        assert run_watchdog(now=beat + timedelta(seconds=961)) == f"failed {audit.pk}: stalled"
    assert state(audit) == ("failed", "stalled")


def test_a_heartbeat_stamped_by_the_database_clock_is_claimed_by_one_watchdog(owner, fast_settings):
    # The claim compares the heartbeat it read with the stored one; SQLite keeps
    # Now() as text to the millisecond, which text equality with a Python value misses.
    audit = make_audit(owner)
    assert audit.start() and audit.begin_crawl("https://shop.example") and audit.begin_finalize()
    first, second = Audit.objects.get(pk=audit.pk), Audit.objects.get(pk=audit.pk)  # two watchdogs read it
    time.sleep(0.01)  # the claim's stamp falls in a later millisecond than the one read
    assert first.claim_for_watchdog() and not second.claim_for_watchdog()
    assert run_watchdog(now=db_now() + timedelta(seconds=30)) == f"re-enqueued finalize of {audit.pk}"
    assert queued_task_names() == {f"audit-{audit.pk}-finalize"}


def test_a_chunk_handed_back_by_the_database_clock_is_re_enqueued_when_its_task_is_lost(owner, fast_settings):
    # give_back stamps created_at with Now(): the watchdog's re-enqueue must match that stamp on SQLite too.
    audit = crawling_audit(owner)
    lease = ChunkLease.objects.get(audit=audit, number=1)
    assert lease.give_back()
    later = db_now() + timedelta(seconds=30)
    audit.beat()
    assert run_watchdog(now=later) == f"re-enqueued lost chunk 1 of {audit.pk}"
    assert queued_task_names() == {f"audit-{audit.pk}-chunk-1"}

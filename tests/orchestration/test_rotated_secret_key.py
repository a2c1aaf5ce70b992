"""RELIABILITY #12: a SECRET_KEY rotated (or a cluster renamed) with tasks queued. Their rows fail the
signature: django-q2's pusher drops them without using up a worker slot, and the watchdog, which reads
an unreadable row as no task, queues the step again."""

import multiprocessing
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.pusher import pusher

from audits.models import Audit
from audits.q_broker import SlotBroker
from audits.q_slots import WorkerSlots
from audits.watchdog import queued_task_names, run_watchdog
from tests.factories import make_audit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_signed_with_a_rotated_key_is_dropped_and_the_watchdog_queues_the_step_again(
        owner, fast_settings, settings, monkeypatch):
    audit = make_audit(owner, start_url="http://127.0.0.1:9/", allow_private=True)
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=10))
    run_watchdog()  # its start task, signed with the key of the day
    assert queued_task_names() == {f"audit-{audit.pk}-start"}

    # What a cluster started with the new key reads (django-q2 keeps the key it started with).
    monkeypatch.setattr(Conf, "SECRET_KEY", "rotated-" + settings.SECRET_KEY)
    assert queued_task_names() == set()  # unreadable now: the watchdog sees no task

    # One pass of django-q2's own pusher over our broker, its worker slot free.
    slots = WorkerSlots(1)
    broker = SlotBroker(list_key=settings.Q_CLUSTER["name"])
    broker.use_slots(slots)
    stop = multiprocessing.Event()
    stop.set()
    handed = multiprocessing.Queue()
    pusher(handed, stop, broker=broker)
    assert not OrmQ.objects.exists()  # dropped, not retried forever
    assert handed.empty()
    assert slots.reserve(timeout=0)  # the slot it reserved for the row is free again

    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=10))
    run_watchdog()
    assert queued_task_names() == {f"audit-{audit.pk}-start"}  # signed with the new key
    assert OrmQ.objects.count() == 1

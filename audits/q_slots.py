"""A cluster's worker slots: tasks it has taken from the broker and not finished, never more than its workers.

A slot is reserved by the pusher before it asks the broker (``SlotBroker``). While
its task waits in the cluster's task queue the reservation is nobody's; the
worker that gets the task holds the slot under its pid until its next get (it
is idle again) or its death, which the sentinel sees when it reincarnates the
worker, whatever the cause: a crash, a timeout kill, a recycle.
"""

import logging
import os

from django_q.cluster import Sentinel, get_mp_context
from django_q.conf import Conf
from django_q.queues import Queue

from .q_broker import SlotBroker

log = logging.getLogger(__name__)


class WorkerSlots:
    """Made in the sentinel before it forks: its pusher, workers and itself share one copy."""

    def __init__(self, workers: int):
        ctx = get_mp_context()
        self.workers = workers
        self._changed = ctx.Condition()  # also the lock of the two counts below
        self._reserved = ctx.RawValue("i", 0)  # taken from the broker, no worker's yet
        self._holders = ctx.RawArray("i", workers)  # pids of workers with a task; 0 is none

    def _taken(self) -> int:
        return self._reserved.value + sum(1 for pid in self._holders if pid)

    def _has_room(self) -> bool:
        return self._taken() < self.workers

    def reserve(self, timeout: float) -> bool:
        with self._changed:
            if not self._changed.wait_for(self._has_room, timeout):
                return False
            self._reserved.value += 1
            return True

    def unreserve(self) -> None:
        with self._changed:
            self._reserved.value = max(0, self._reserved.value - 1)
            self._changed.notify_all()

    def claim(self, pid: int) -> None:
        with self._changed:
            self._reserved.value = max(0, self._reserved.value - 1)
            for i, held in enumerate(self._holders):
                if not held:
                    self._holders[i] = pid
                    return
            # Only after recount_queued raced a worker's get: the task runs, uncounted.
            log.warning("worker %s took a task with every slot held", pid)

    def release(self, pid: int) -> None:
        with self._changed:
            for i, held in enumerate(self._holders):
                if held == pid:
                    self._holders[i] = 0
                    self._changed.notify_all()

    def recount_queued(self, queued: int) -> None:
        """After the pusher died: a reservation it held but never queued is nobody's.

        A worker between its get and its claim is in neither count, so at worst the
        cluster takes one task too many, once; a slot lost for good would be worse.
        """
        with self._changed:
            self._reserved.value = min(self._reserved.value, queued)
            self._changed.notify_all()


class SlotQueue(Queue):
    """The cluster's task queue, through which a worker takes and gives back its slot.

    django-q2's worker asks for its next task only when its last one is done, so
    that get is where it is idle again. Shared by fork only, as django-q2's own queues are.
    """

    def __init__(self, slots: WorkerSlots, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.slots = slots

    def get(self, *args, **kwargs):
        pid = os.getpid()
        self.slots.release(pid)
        task = super().get(*args, **kwargs)
        if task != "STOP":  # the sentinel's poison pill is no task
            self.slots.claim(pid)
        return task


class SlotSentinel(Sentinel):
    def __init__(self, *args, start=True, **kwargs):
        # django-q2 forks its pusher and workers in __init__: the slots and the queue
        # that carries them are put in place first, then it starts.
        super().__init__(*args, start=False, **kwargs)
        self.slots = WorkerSlots(self.pool_size)
        self.task_queue = SlotQueue(self.slots, maxsize=Conf.QUEUE_LIMIT or 0)
        if isinstance(self.broker, SlotBroker):
            self.broker.use_slots(self.slots)
        else:
            log.warning("broker %s takes tasks whether or not a worker is free", type(self.broker).__name__)
        if start:
            self.start()

    def reincarnate(self, process):
        pusher = process == self.pusher
        # After django-q2's, which terminates a timed-out worker: a dead worker cannot take another task.
        super().reincarnate(process)
        if pusher:
            self.slots.recount_queued(self.task_queue.qsize())
        else:
            self.slots.release(process.pid)

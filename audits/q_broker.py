"""django-q2's ORM broker, taking a task only when one of the cluster's workers is free.

django-q2's pusher keeps taking tasks while every worker is busy: up to
``queue_limit`` wait in the cluster's memory, plus one in the pusher's hand. With
several clusters on one database, a task taken that way waits for a busy worker
while another cluster's workers are idle. Here the pusher first reserves one of
its cluster's worker slots (``audits.q_slots.WorkerSlots``, which our ``qcluster``
gives the broker before it forks) and takes nothing while none is free.
"""

from django.core.exceptions import ImproperlyConfigured
from django_q.brokers.orm import ORM
from django_q.conf import Conf


class SlotBroker(ORM):
    # Only a cluster's broker has slots; elsewhere (the web, the scheduler's
    # enqueues) this is django-q2's ORM broker unchanged.
    slots = None

    def use_slots(self, slots) -> None:
        # One reservation covers one task: a bulk dequeue would take tasks no worker is free for.
        if Conf.BULK != 1:
            raise ImproperlyConfigured(f"Q_CLUSTER['bulk'] must be 1 for {type(self).__name__}, not {Conf.BULK}.")
        self.slots = slots

    def dequeue(self):
        if self.slots is None:
            return super().dequeue()
        # Waiting on the slots (not the database) while every worker is busy: a
        # finished task wakes the pusher at once, and the pusher still sees its stop event.
        if not self.slots.reserve(timeout=Conf.POLL):
            return None
        try:
            tasks = super().dequeue()
        except BaseException:
            self.slots.unreserve()
            raise
        if not tasks:  # an empty queue, or another cluster was faster
            self.slots.unreserve()
        return tasks

    def fail(self, task_id):
        # The pusher's only call: a task it took but could not unpack reaches no worker.
        if self.slots is not None:
            self.slots.unreserve()
        super().fail(task_id)

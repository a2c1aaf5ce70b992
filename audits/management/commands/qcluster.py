"""django-q2's ``qcluster``, whose running chunks hand their URLs back when it is told to stop.

On SIGTERM (or Ctrl-C) django-q2 lets each worker finish its task, which for a
crawl chunk can take its whole soft deadline, while its URLs stay leased. This
cluster first marks the chunk leases its workers hold (``ChunkLease.cluster``,
the id its workers inherit through the environment) as asked to stop: each
chunk sees that at its next heartbeat or write, keeps what it stored, puts the
rest back in the frontier and queues the next chunk, which another cluster
takes at once. Then django-q2 stops as it always does.

Its sentinel is ``SlotSentinel``: the cluster takes a task from the broker only
when one of its workers is free (``audits.q_slots``), so a task never waits here
while another cluster could start it.
"""

import logging
import multiprocessing
import os
import uuid
from time import sleep

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django_q.cluster import Cluster, get_mp_context
from django_q.conf import setproctitle
from django_q.management.commands.qcluster import Command as QClusterCommand

from ...models import ChunkLease
from ...models.lease import CLUSTER_ID_VARIABLE
from ...q_slots import SlotSentinel

log = logging.getLogger(__name__)


class ReleasingCluster(Cluster):
    def start(self) -> int:
        # django-q2's Cluster.start, which names its Sentinel class outright, with ours.
        if setproctitle:
            setproctitle.setproctitle(f"qcluster {multiprocessing.current_process().name} {self.name}")
        self.stop_event = multiprocessing.Event()
        self.start_event = multiprocessing.Event()
        self.sentinel = get_mp_context().Process(
            target=SlotSentinel, name=f"Process-{uuid.uuid4().hex}",
            args=(self.stop_event, self.start_event, self.cluster_id, self.broker, self.timeout))
        self.sentinel.start()
        log.info("Q Cluster %s starting.", self.name)
        # Polled, not waited on: a signal while blocked in wait() deadlocks with the
        # sentinel; the signal handler may also clear start_event.
        while self.start_event and not self.start_event.is_set():
            if not self.sentinel.is_alive():
                if self.sentinel.exitcode == 0:  # stopped by a signal during start-up
                    break
                raise RuntimeError(f"Q Cluster {self.name} failed to start: sentinel exited "
                                   f"with code {self.sentinel.exitcode}")
            sleep(0.1)
        return self.pid

    def sig_handler(self, signum, frame):
        cluster = os.environ.get(CLUSTER_ID_VARIABLE, "")
        try:
            asked = ChunkLease.objects.request_stop(cluster)
            log.info("cluster %s stopping: %s running chunk(s) asked to hand their URLs back", cluster, asked)
        except Exception:  # the stop itself must happen whatever the database says
            log.exception("could not ask this cluster's chunks to hand their URLs back")
        finally:
            connection.close()
        super().sig_handler(signum, frame)


class Command(QClusterCommand):
    help = "Starts a django-q2 cluster whose running crawl chunks hand their URLs back when it stops."

    def handle(self, *args, **options):
        if not settings.SECRET_KEY:  # as django-q2's: signing needs it
            raise ImproperlyConfigured("The cluster signs its tasks with SECRET_KEY, which is not set.")
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        # Before the workers fork, so every chunk they claim carries this cluster's id.
        os.environ[CLUSTER_ID_VARIABLE] = uuid.uuid4().hex
        cluster = ReleasingCluster()
        cluster.start()
        if options.get("run_once", False):
            cluster.stop()

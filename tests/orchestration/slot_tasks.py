"""Tasks for the worker-slot tests, run by a real cluster: each records, as one JSON
file named after its task, which cluster and worker ran it and when it was taken
from the broker, started and ended; the bad ones fail, die, or overrun their timeout."""

import json
import os
import signal
import time
from pathlib import Path

from django_q.conf import Conf
from django_q.models import OrmQ

from audits.models.lease import CLUSTER_ID_VARIABLE


def _record(record_dir: str, name: str, **fields) -> None:
    path = Path(record_dir) / f"{name}.json"
    partial = path.with_suffix(".part")
    partial.write_text(json.dumps({"name": name, "cluster": os.environ[CLUSTER_ID_VARIABLE],
                                   "pid": os.getpid(), **fields}))
    partial.rename(path)  # whole or absent for the test that polls the folder


def _taken_at(name: str) -> float:
    """When the cluster took this task: the broker locks its row for ``retry`` seconds from then."""
    row = next(row for row in OrmQ.objects.filter(key=Conf.CLUSTER_NAME) if row.name() == name)
    return row.lock.timestamp() - Conf.RETRY


def nap(record_dir: str, name: str, seconds: float) -> None:
    started = time.time()
    taken = _taken_at(name)
    time.sleep(seconds)
    _record(record_dir, name, taken=taken, started=started, ended=time.time())


def fail(record_dir: str, name: str) -> None:
    _record(record_dir, name, started=time.time())
    raise RuntimeError("a task that fails")


def die(record_dir: str, name: str) -> None:
    _record(record_dir, name, started=time.time())
    os._exit(137)  # as an OOM kill ends a worker


def overrun(record_dir: str, name: str) -> None:
    """Past the timeout: django-q2's alarm interrupts it and the worker exits."""
    _record(record_dir, name, started=time.time())
    time.sleep(60)


def hang(record_dir: str, name: str) -> None:
    """Deaf to the timeout's alarm, so the sentinel kills the worker when its timer runs out."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    _record(record_dir, name, started=time.time())
    time.sleep(60)

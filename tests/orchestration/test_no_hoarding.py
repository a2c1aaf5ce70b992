"""A cluster takes a task from the broker only when one of its workers is free (audits.q_broker).

Real `manage.py qcluster` processes on the test database. When a cluster took a
task is read from the broker's lock on it (slot_tasks), so "held" is what the
cluster took and had not finished: in its memory or running.
"""

import json
import time
from pathlib import Path

import psutil
import pytest
from django.db import transaction
from django_q.tasks import async_task

from audits.q_slots import WorkerSlots
from tests.conftest import wait_for

TASKS = "tests.orchestration.slot_tasks"
WORKERS = 2
NAP = 2.0


def enqueue(record_dir: Path, func: str, name: str, *args) -> None:
    async_task(f"{TASKS}.{func}", str(record_dir), name, *args, task_name=name)


def records(record_dir: Path, names) -> dict:
    found = {name: record_dir / f"{name}.json" for name in names}
    return {name: json.loads(path.read_text()) for name, path in found.items() if path.exists()}


def wait_running(*clusters) -> None:
    for cluster in clusters:
        wait_for(lambda c=cluster: "] running." in c.log(), 20, interval=0.1,
                 message=lambda c=cluster: f"the cluster to start:\n{c.log()}")


def most_held(runs: list[dict]) -> int:
    """The most tasks one cluster had taken and not yet finished at any moment."""
    return max(sum(1 for other in runs if other["taken"] <= run["taken"] < other["ended"]) for run in runs)


def test_slots_count_what_was_taken_until_its_worker_is_idle_or_gone():
    slots = WorkerSlots(2)
    assert slots.reserve(timeout=0) and slots.reserve(timeout=0)
    assert not slots.reserve(timeout=0.01)  # both workers spoken for
    slots.claim(101)
    slots.claim(102)
    slots.release(101)
    slots.release(101)  # its next get, then its reincarnation: one slot back, not two
    assert slots.reserve(timeout=0) and not slots.reserve(timeout=0.01)
    slots.unreserve()  # the broker had nothing
    slots.release(102)
    assert slots.reserve(timeout=0) and slots.reserve(timeout=0)
    slots.recount_queued(1)  # the pusher died holding one of them
    assert slots.reserve(timeout=0) and not slots.reserve(timeout=0.01)


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_two_clusters_each_take_only_what_their_workers_can_start(cluster_factory, tmp_path):
    first, second = cluster_factory(Q_WORKERS=WORKERS), cluster_factory(Q_WORKERS=WORKERS)
    wait_running(first.start(), second.start())
    # Three tasks for each cluster's two workers, all visible at once: a cluster that
    # took tasks for busy workers would hold at least three.
    names = [f"nap-{n}" for n in range(3 * WORKERS)]
    with transaction.atomic():
        for name in names:
            enqueue(tmp_path, "nap", name, NAP)
    enqueued = time.time()
    done = wait_for(lambda: (found := records(tmp_path, names)).keys() == set(names) and found, 20,
                    message=lambda: f"every task to run:\n{first.log()}\n{second.log()}")

    by_cluster: dict[str, list[dict]] = {}
    for run in done.values():
        by_cluster.setdefault(run["cluster"], []).append(run)
    assert len(by_cluster) == 2, f"one cluster ran every task: {done}"
    for cluster, runs in by_cluster.items():
        assert min(run["started"] for run in runs) - enqueued < 3, f"cluster {cluster} started late"
        assert most_held(runs) <= WORKERS, f"cluster {cluster} held more tasks than workers: {runs}"
    for run in done.values():  # taken for a free worker, so started at once
        assert run["started"] - run["taken"] < 1, run


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_a_slot_comes_back_from_a_failed_dead_timed_out_or_recycled_worker(cluster_factory, tmp_path):
    # Workers recycled after every task; a 2 s timeout (the sentinel kills a deaf
    # worker 3 s later); no redelivery of the killed workers' tasks during the test.
    cluster = cluster_factory(DJANGO_SETTINGS_MODULE="tests.orchestration.slot_settings", Q_WORKERS=WORKERS,
                              Q_TIMEOUT=2, SITEWARD_CHUNK_SECONDS=1, Q_RETRY=60)
    wait_running(cluster.start())
    bad = {"fail": "fail", "die": "die", "overrun": "overrun", "hang": "hang"}
    for name, func in bad.items():
        enqueue(tmp_path, func, name)

    def gone(run: dict) -> bool:  # a killed worker stays a zombie until its sentinel next forks
        try:
            return psutil.Process(run["pid"]).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    # Every bad task started and its worker is gone (recycled, died or killed).
    wait_for(lambda: len(found := records(tmp_path, bad)) == len(bad) and all(map(gone, found.values())), 20,
             message=lambda: f"the bad tasks to end their workers:\n{cluster.log()}")

    # Both slots free again: two tasks start side by side on two workers.
    names = ["after-0", "after-1"]
    for name in names:
        enqueue(tmp_path, "nap", name, 1.5)
    done = wait_for(lambda: (found := records(tmp_path, names)).keys() == set(names) and found, 15,
                    message=lambda: f"the tasks after them to run:\n{cluster.log()}")
    first, second = done.values()
    assert first["pid"] != second["pid"]
    assert abs(first["started"] - second["started"]) < 1, done

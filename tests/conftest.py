"""Fixtures shared by the whole suite: people, logged-in clients, subprocess helpers."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user("stranger", password="stranger-pass-123")


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def subprocess_env(**extra) -> dict:
    """Environment for a manage.py subprocess that must use the test database.

    pytest-django has already switched the connection to the test database, so
    its settings name the database (or SQLite file) the child must open.
    """
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "sqlite":
        url = "sqlite:///" + str(Path(db["NAME"]).resolve())
    else:
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        url = f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"))}
    env.update(
        DATABASE_URL=url,
        SECRET_KEY="test-only-secret-key-not-for-production-use-0123456789",
        DJANGO_SETTINGS_MODULE="config.settings",
        PYTHONUNBUFFERED="1",
    )
    # None drops a variable, so the child runs on the setting's default.
    env.update({k: str(v) for k, v in extra.items() if v is not None})
    for name in [k for k, v in extra.items() if v is None]:
        env.pop(name, None)
    return env


MANAGE = [sys.executable, str(ROOT / "manage.py")]


# Small numbers so leases expire and tasks are redelivered within seconds.
FAST = {
    "Q_TIMEOUT": 8, "Q_RETRY": 12, "Q_POLL": 0.1, "Q_WORKERS": 2, "Q_SCHEDULER": 0,
    "SITEWARD_CHUNK_SIZE": 10, "SITEWARD_CHUNK_SECONDS": 5, "SITEWARD_LEASE_SECONDS": 4,
    "SITEWARD_MAX_CHUNK_ATTEMPTS": 3, "SITEWARD_FETCH_DEADLINE": 5, "SITEWARD_WATCHDOG_GRACE": 2,
    "SITEWARD_ALLOW_PRIVATE": 1,
}


@pytest.fixture
def fast_settings(settings):
    settings.SITEWARD = {
        **settings.SITEWARD, "CHUNK_SIZE": 10, "CHUNK_SOFT_DEADLINE": 5.0, "LEASE_SECONDS": 4,
        "MAX_CHUNK_ATTEMPTS": 3, "FETCH_DEADLINE": 5.0, "WATCHDOG_GRACE_SECONDS": 2, "STALL_SECONDS": 900,
        "ALLOW_PRIVATE_TARGETS": True, "ROBOTS_RETRY_SECONDS": (0.1,),
    }
    return settings


class Cluster:
    """A `manage.py qcluster` subprocess in its own session, so one signal reaches all of it."""

    def __init__(self, env: dict, log_path: Path):
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> Cluster:
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(MANAGE + ["qcluster"], cwd=ROOT, env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def kill(self) -> None:
        """SIGKILL the whole cluster: sentinel, pusher, monitor and workers."""
        if self.proc is None:
            return
        try:  # the whole group, even if the sentinel itself is already gone
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc:
            try:  # reap stragglers of the group (workers) so no test leaves processes behind
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@pytest.fixture
def cluster_factory(transactional_db, tmp_path, fast_settings):
    clusters: list[Cluster] = []

    def make(**extra) -> Cluster:
        env = subprocess_env(**{**FAST, **extra})
        cluster = Cluster(env, tmp_path / f"qcluster-{len(clusters)}.log")
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.kill()  # graceful shutdown is not what these tests are about, and takes seconds


@pytest.fixture
def running_cluster(cluster_factory):
    return cluster_factory().start()


def wait_for(predicate, timeout: float, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message() if callable(message) else message}")


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: blocks are of what runs
def pytest_collection_modifyitems(config, items):
    """The tests that wait on real worker clusters (django-q2's scheduler looks every
    30 s) start first, shared between two xdist workers, so that they wait beside
    the rest of the suite instead of after it, and no more than two clusters share
    the cores at once. xdist's worksteal hands each worker a contiguous block of
    about ``len(items) / workers`` tests, run from its front, so each share goes at
    the front of one block. Every other test keeps its order."""
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    waiting = [item for item in items if item.get_closest_marker("cluster")]
    rest = iter([item for item in items if not item.get_closest_marker("cluster")])
    lanes = min(2, workers)
    block = len(items) // workers
    ordered = []
    for lane in range(lanes):
        ordered += waiting[lane::lanes]
        if lane < lanes - 1:
            ordered += itertools.islice(rest, max(0, (lane + 1) * block - len(ordered)))
    ordered += rest
    items[:] = ordered

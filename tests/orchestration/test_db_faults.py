"""A busy or briefly unreachable database during a chunk: retried in the chunk, never a lost attempt or a failed audit.

SQLite: a second connection holds the write lock (BEGIN IMMEDIATE) while the
chunk writes. PostgreSQL: a loopback TCP proxy between Django and the server is
cut for two seconds mid-crawl (the shared server itself is never restarted).
"""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import threading
import time
from datetime import timedelta

import pytest
from django.db import OperationalError as DjangoOperationalError
from django.db import connection
from django.utils import timezone

from audits.crawl.chunk import run_chunk
from audits.crawl.db_retry import db_fault
from audits.crawl.start import run_start
from audits.dispatch import InlineDispatcher
from audits.inline import run_audit_inline
from audits.models import Audit, ChunkLease, FrontierURL, Page
from audits.models.lease import ChunkLease as LeaseModel
from tests import driver_errors
from tests.factories import make_audit

from .grid_site import GridSite

pytestmark = pytest.mark.django_db(transaction=True)

sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock")
postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL connection cut")


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


# --- SQLite: another writer holds the lock ---------------------------------------------------------

@pytest.fixture
def short_busy_timeout():
    """Half a second of SQLite busy wait instead of the real 20 s, for this test's connection."""
    options = connection.settings_dict["OPTIONS"]
    old = options.get("timeout")
    options["timeout"] = 0.5
    connection.close()
    yield
    options["timeout"] = old
    connection.close()


class WriteLock:
    """BEGIN IMMEDIATE on the test database from a second sqlite3 connection, in a thread."""

    def __init__(self, path: str):
        self.path = path
        self.held = threading.Event()
        self.release = threading.Event()
        self.thread: threading.Thread | None = None

    def take_when(self, ready, hold: float | None = None) -> WriteLock:
        def run():
            wait_for(ready, 20)
            con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            try:
                con.execute("BEGIN IMMEDIATE")
                self.held.set()
                self.release.wait(hold if hold is not None else 60)
                con.rollback()
            finally:
                con.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self.thread:
            self.thread.join(10)


def started_audit(owner, site) -> Audit:
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=200, max_depth=8)
    run_start(audit.pk, InlineDispatcher())
    audit.refresh_from_db()
    return audit


def assert_stored_once(audit: Audit, site: GridSite) -> None:
    hashes = list(Page.objects.filter(audit=audit).values_list("url_hash", flat=True))
    assert len(hashes) == len(set(hashes))
    for url in Page.objects.filter(audit=audit).values_list("url", flat=True):
        assert site.hits(url.removeprefix(site.url(""))) == 1, url


@sqlite_only
def test_a_write_lock_held_for_seconds_is_waited_out_inside_the_chunk(
        owner, fast_settings, short_busy_timeout, caplog):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "LEASE_SECONDS": 30, "DB_RETRY_SECONDS": 20.0}
    with GridSite(pages=40, delay=0.3) as site:
        audit = started_audit(owner, site)
        lock = WriteLock(connection.settings_dict["NAME"]).take_when(site.serving, hold=3.0)
        try:
            result = run_chunk(audit.pk, 1, InlineDispatcher())
        finally:
            lock.stop()
        assert lock.held.is_set()
        assert result == "done"
        lease = ChunkLease.objects.get(audit=audit, number=1)
        assert lease.state == ChunkLease.State.DONE
        assert lease.attempts == 1
        assert not FrontierURL.objects.filter(audit=audit, chunk=1, state=FrontierURL.State.LEASED).exists()
        assert Page.objects.filter(audit=audit).count() > 1
        assert_stored_once(audit, site)
        assert not Page.objects.filter(audit=audit, fetch_error="worker_lost").exists()
        assert "database busy" in caplog.text  # the write did meet the lock


@sqlite_only
def test_a_write_lock_held_past_the_bound_gives_the_chunk_back_uncounted(
        owner, fast_settings, short_busy_timeout, monkeypatch):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "LEASE_SECONDS": 30, "DB_RETRY_SECONDS": 2.0}
    with GridSite(pages=40, delay=0.3) as site:
        audit = started_audit(owner, site)
        lock = WriteLock(connection.settings_dict["NAME"]).take_when(site.serving)
        real_give_back = LeaseModel.give_back
        gave_up = threading.Event()

        def give_back(self):
            # The chunk has given up writing: only now does the other writer let go.
            if not gave_up.is_set():
                gave_up.set()
                lock.stop()
            return real_give_back(self)

        monkeypatch.setattr(LeaseModel, "give_back", give_back)
        try:
            result = run_chunk(audit.pk, 1)
        finally:
            lock.stop()
        assert lock.held.is_set() and gave_up.is_set()
        assert result == "db-busy"
        lease = ChunkLease.objects.get(audit=audit, number=1)
        assert lease.state == ChunkLease.State.QUEUED
        assert lease.attempts == 0
        assert lease.token is None
        assert not FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.LEASED).exists()
        assert not Page.objects.filter(audit=audit, fetch_error="worker_lost").exists()
        audit.refresh_from_db()
        assert audit.status == Audit.Status.RUNNING


# --- PostgreSQL: the connection is cut ----------------------------------------------------------

class CuttableProxy:
    """A loopback TCP proxy to PostgreSQL that can drop every connection and refuse new ones."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        self.cuts = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                self.refused += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.open = False
        self.cuts += 1
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        self.open = True

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.listener.close()


@pytest.fixture
def proxied_connection(transactional_db):
    settings_dict = connection.settings_dict
    host, port = settings_dict["HOST"] or "127.0.0.1", int(settings_dict["PORT"] or 5432)
    proxy = CuttableProxy((host, port))
    old = settings_dict["HOST"], settings_dict["PORT"]
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", str(proxy.port)
    yield proxy
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = old
    proxy.close()


@postgres_only
def test_a_two_second_database_outage_mid_crawl_does_not_fail_the_audit(
        owner, fast_settings, proxied_connection, caplog):
    proxy = proxied_connection
    cut_done = threading.Event()
    state = {"batches": 0}

    def outage():
        proxy.cut()
        time.sleep(2.0)
        proxy.restore()
        cut_done.set()

    def on_batch(outcomes, issues, kinds):
        state["batches"] += 1
        if state["batches"] == 2:  # mid-crawl, on the task's thread just after a commit
            threading.Thread(target=outage, daemon=True).start()

    with GridSite(pages=80, delay=0.3) as site:
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=200, max_depth=8)
        run_audit_inline(audit.pk, on_batch=on_batch)
        assert cut_done.wait(10)
        audit.refresh_from_db()
        assert audit.error_code != Audit.ErrorCode.INTERNAL_ERROR, audit.error_detail
        assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
        assert proxy.cuts == 1
        assert "database connection" in caplog.text  # a write did meet the outage
        assert_stored_once(audit, site)
        assert audit.pages.filter(kind="page").count() == len(site.page_paths())
        assert not audit.pages.filter(fetch_error="worker_lost").exists()


def _unreachable_database(owner, grid_site, fast_settings, monkeypatch):
    """A started audit whose chunks meet a database that never answers, on a clock the test moves."""
    from types import SimpleNamespace

    from audits.crawl import chunk
    from audits.crawl.db_retry import DatabaseDown

    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "DB_RETRY_SECONDS": 1.0, "DB_UNAVAILABLE_SECONDS": 60.0}
    audit = make_audit(owner, start_url=grid_site.url("/"), allow_private=True)
    run_start(audit.pk, InlineDispatcher())
    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(chunk, "time", SimpleNamespace(monotonic=lambda: clock.now))

    def unreachable(*args):
        raise DatabaseDown("connection refused")

    monkeypatch.setattr(chunk, "claim", unreachable)
    return audit, clock


def test_a_database_unreachable_past_the_bound_fails_the_audit_as_database_unavailable(owner, grid_site,
                                                                                       fast_settings, monkeypatch):
    # Until DB_UNAVAILABLE_SECONDS have passed since this worker first failed to reach
    # the database, a chunk only gives up (the watchdog retries it); after, the audit fails.
    audit, clock = _unreachable_database(owner, grid_site, fast_settings, monkeypatch)
    assert run_chunk(audit.pk, 1) == "db-unavailable"
    clock.now += 30
    assert run_chunk(audit.pk, 1) == "db-unavailable"
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING
    clock.now += 31
    quiet_since(audit, minutes=2)  # and no other worker got through meanwhile
    assert run_chunk(audit.pk, 1) == "failed"
    audit.refresh_from_db()
    assert (audit.status, audit.error_code) == ("failed", "database_unavailable")
    assert "could not be reached for" in audit.error_detail


def quiet_since(audit: Audit, *, minutes: int) -> None:
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=minutes))


def test_a_worker_that_cannot_reach_the_database_leaves_the_audit_running_while_others_beat_it(
        owner, grid_site, fast_settings, monkeypatch):
    """One machine's link to PostgreSQL is down; the other clusters crawl on, and their beats say so."""
    audit, clock = _unreachable_database(owner, grid_site, fast_settings, monkeypatch)
    assert run_chunk(audit.pk, 1) == "db-unavailable"
    clock.now += 61
    Audit.objects.filter(pk=audit.pk).update(heartbeat_at=timezone.now())  # another cluster's write
    assert run_chunk(audit.pk, 1) == "db-unavailable"
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING


def test_two_short_outages_hours_apart_do_not_add_up_to_one_long_one(owner, grid_site, fast_settings, monkeypatch):
    """A worker that met one outage and ran no chunk of the audit since must not count the hours between."""
    audit, clock = _unreachable_database(owner, grid_site, fast_settings, monkeypatch)
    assert run_chunk(audit.pk, 1) == "db-unavailable"
    clock.now += 3 * 3600  # another chunk of the audit ran on another cluster meanwhile
    assert run_chunk(audit.pk, 1) == "db-unavailable"
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING


def test_a_sql_function_that_raised_is_no_transient_fault_to_try_again():
    # A SQL function of Django's raised in Python, or was interrupted by Ctrl-C: a retry would repeat it,
    # or swallow the interrupt and crawl on.
    assert db_fault(driver_errors.sqlite_function_raised()) is None


def test_database_faults_are_told_apart_by_the_drivers_error_code_not_the_message():
    assert db_fault(driver_errors.sqlite_locked()) == "busy"
    assert db_fault(driver_errors.postgres_deadlock()) == "busy"
    assert db_fault(driver_errors.sqlite_full()) is None
    assert db_fault(driver_errors.postgres_disk_full()) is None
    # The same words without the driver's code decide nothing: a lost connection, as any unknown fault.
    assert db_fault(DjangoOperationalError("database is locked")) == "connection"
    assert db_fault(DjangoOperationalError("database or disk is full")) == "connection"
    assert db_fault(DjangoOperationalError("server closed the connection unexpectedly")) == "connection"
    assert db_fault(ValueError("database is locked")) is None

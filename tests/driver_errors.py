"""Real database driver errors, raised by the drivers themselves, wrapped as Django wraps them.

The crawl decides what is transient by the driver's error code (SQLite's
result code, PostgreSQL's SQLSTATE), so a test's error must carry one: a
Django error built from a message alone carries none.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import psycopg
from django.db import OperationalError


def _wrapped(exc: Exception) -> OperationalError:
    # As django.db.utils.DatabaseErrorWrapper does: the same args, the driver's error as the cause.
    try:
        raise OperationalError(*exc.args) from exc
    except OperationalError as wrapped:
        return wrapped


def _sqlite_error(run) -> sqlite3.Error:
    with tempfile.TemporaryDirectory() as folder:
        db = sqlite3.connect(Path(folder) / "t.sqlite3", timeout=0, isolation_level=None)
        other = sqlite3.connect(Path(folder) / "t.sqlite3", timeout=0, isolation_level=None)
        try:
            run(db, other)
        except sqlite3.Error as exc:
            return exc
        finally:
            db.close()
            other.close()
    raise AssertionError("SQLite raised nothing")


def _locked(db, other) -> None:
    db.execute("CREATE TABLE t (x)")
    other.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO t VALUES (1)")


def _full(db, other) -> None:
    db.execute("PRAGMA max_page_count = 3")
    db.execute("CREATE TABLE t (x)")
    for _ in range(1000):
        db.execute("INSERT INTO t VALUES (?)", ["x" * 1000])


def _function_raised(db, other) -> None:
    db.create_function("boom", 0, lambda: 1 / 0)
    db.execute("SELECT boom()")


def sqlite_locked() -> OperationalError:
    """SQLite's "database is locked" (SQLITE_BUSY): another connection holds the write lock."""
    return _wrapped(_sqlite_error(_locked))


def sqlite_full() -> OperationalError:
    """SQLite's "database or disk is full" (SQLITE_FULL), from a database capped at three pages."""
    return _wrapped(_sqlite_error(_full))


def sqlite_function_raised() -> OperationalError:
    """SQLite's "user-defined function raised exception" (SQLITE_ERROR): a Python SQL function failed."""
    return _wrapped(_sqlite_error(_function_raised))


def postgres_disk_full() -> OperationalError:
    """PostgreSQL's disk_full (SQLSTATE 53100), as psycopg raises it."""
    return _wrapped(psycopg.errors.DiskFull('could not extend file "base/16384/16412": No space left on device'))


def postgres_deadlock() -> OperationalError:
    """PostgreSQL's deadlock_detected (SQLSTATE 40P01), as psycopg raises it."""
    return _wrapped(psycopg.errors.DeadlockDetected("deadlock detected"))

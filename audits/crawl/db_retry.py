"""A chunk's database work against a busy SQLite or a PostgreSQL that went away for a moment.

A locked database or a dropped connection is transient: the whole transaction
is tried again with backoff, reconnecting after a connection fault, for
DB_RETRY_SECONDS; then the caller gets DatabaseBusy or DatabaseDown and gives
the chunk back instead of letting a lease expire and count an attempt.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import time

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from ..knobs import knob

log = logging.getLogger(__name__)


class DatabaseBusy(Exception):
    """SQLite stayed locked (another writer) for DB_RETRY_SECONDS: give the chunk back, uncounted."""


class DatabaseDown(Exception):
    """The database connection kept failing for DB_RETRY_SECONDS: leave the lease to the watchdog."""


# Pauses between tries of a write that met a busy or unreachable database; the
# last one repeats until DB_RETRY_SECONDS have passed.
DB_BACKOFF = (0.5, 1.0, 2.0, 4.0)


# PostgreSQL's deadlock and serialization failures: the transaction was rolled
# back for another's sake, and trying it again is the documented remedy.
DEADLOCK_STATES = frozenset({"40P01", "40001"})
# SQLite's primary result codes (sqlite.org/rescode.html) for another writer
# holding the lock, and for a file that could not be read or opened this time.
SQLITE_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL})
SQLITE_RECONNECT_CODES = frozenset({sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN})


def _driver_error(exc: BaseException) -> BaseException:
    """The driver's exception behind Django's wrapper (its ``__cause__``), or ``exc`` itself."""
    if isinstance(exc, DatabaseError | InterfaceError) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


def _sqlite_code(exc: BaseException) -> int | None:
    """The SQLite primary result code of a sqlite3 error, or None for any other error."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(exc, sqlite3.Error) and code is not None else None


def storage_full(exc: BaseException) -> bool:
    """SQLite's SQLITE_FULL or PostgreSQL's disk_full (SQLSTATE 53100): no retry will fit the rows."""
    cause = _driver_error(exc)
    return _sqlite_code(cause) == sqlite3.SQLITE_FULL or getattr(cause, "sqlstate", None) == "53100"


def db_fault(exc: BaseException) -> str | None:
    """"busy" (SQLite locked, a deadlock), "connection" (worth a reconnect and a retry), or None (not transient).

    Judged by the driver's error code behind Django's wrapper, never its text;
    a raw psycopg error (COPY runs on the driver's cursor) is judged the same
    way. A full disk is not transient, nor is a SQLite statement that failed in
    itself (SQLITE_ERROR: a SQL function of Django's raised, or Ctrl-C came in one).
    """
    if not isinstance(exc, (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)):
        return None
    if storage_full(exc):
        return None
    cause = _driver_error(exc)
    code = _sqlite_code(cause)
    if code is not None:
        if code in SQLITE_BUSY_CODES:
            return "busy"
        return "connection" if code in SQLITE_RECONNECT_CODES else None
    if getattr(cause, "sqlstate", None) in DEADLOCK_STATES:
        return "busy"
    return "connection"


def close_connection() -> None:
    """Drop this thread's connection; the next query opens a fresh one."""
    try:
        connection.close()
    except Exception:  # closing a dead connection may fail too; it is gone either way
        log.debug("closing the database connection failed", exc_info=True)
        connection.connection = None


def beat_missed(exc: Exception, what: str) -> None:
    """A heartbeat the database did not take: logged, not fatal (a lease or a grace lasts several beats), a
    lost connection closed for the next call to open anew. An error that is no database fault is raised."""
    fault = db_fault(exc)
    if fault is None:
        raise exc
    if fault == "connection":
        close_connection()
    log.warning("%s: heartbeat missed, database %s (%s)", what, fault, exc)


def with_db_retry(fn, *args, seconds: float | None = None, what: str = "write"):
    """Run ``fn(*args)`` (a whole transaction), retrying a busy or unreachable database with backoff.

    A failed transaction was rolled back by its ``atomic`` block; a connection
    fault also drops the connection, so the next try reconnects. After
    ``seconds`` (DB_RETRY_SECONDS) of failures: DatabaseBusy or DatabaseDown.
    Inside a caller's transaction nothing can be retried: the error goes on.
    """
    seconds = knob("DB_RETRY_SECONDS") if seconds is None else seconds
    give_up_at = time.monotonic() + seconds
    for attempt in itertools.count():  # bounded by the clock below
        try:
            return fn(*args)
        except Exception as exc:
            fault = db_fault(exc)
            if fault is None or connection.in_atomic_block:
                raise
            if fault == "connection":
                close_connection()
            pause = DB_BACKOFF[min(attempt, len(DB_BACKOFF) - 1)]
            if time.monotonic() + pause > give_up_at:
                error = DatabaseBusy if fault == "busy" else DatabaseDown
                raise error(f"{what}: {type(exc).__name__}: {exc}") from exc
            log.warning("%s: database %s (%s); trying again in %.1f s", what, fault, exc, pause)
            time.sleep(pause)

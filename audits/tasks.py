"""django-q2 entry points. Thin: ids in, the work is in crawling.py, finalize.py and watchdog.py.

Tasks record crawl failures on our own rows and return normally; they raise only
for "run me again" cases (the database was unavailable), which the lease table and
the watchdog then retry. Never pass model instances through the queue.
"""

import logging

from django.db import DatabaseError, OperationalError

from .crawling import run_chunk, run_start
from .finalize import run_finalize
from .models import Audit
from .watchdog import run_watchdog

log = logging.getLogger(__name__)


def _fail_on_bug(audit_id: int, phase: str, exc: Exception) -> None:
    """A programming error is recorded on the audit instead of vanishing into a task log."""
    log.exception("audit %s: %s failed", audit_id, phase)
    audit = Audit.objects.filter(pk=audit_id).first()
    if audit is not None:
        audit.fail(Audit.ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}", phase)


def start(audit_id: int) -> None:
    try:
        run_start(audit_id)
    except (OperationalError, DatabaseError):
        raise  # the database will come back; the watchdog retries a start with a stale heartbeat
    except Exception as exc:
        _fail_on_bug(audit_id, Audit.Phase.STARTING, exc)


def resume(audit_id: int) -> None:
    from .crawling import run_resume

    try:
        run_resume(audit_id)
    except (OperationalError, DatabaseError):
        raise
    except Exception as exc:
        _fail_on_bug(audit_id, Audit.Phase.CRAWLING, exc)


def crawl_chunk(audit_id: int, number: int) -> str:
    try:
        return run_chunk(audit_id, number)
    except (OperationalError, DatabaseError):
        # Retryable: the lease expires and the watchdog re-enqueues the chunk,
        # counting the attempt.
        raise
    except Exception as exc:
        _fail_on_bug(audit_id, Audit.Phase.CRAWLING, exc)
        return "failed"


def finalize(audit_id: int) -> None:
    try:
        run_finalize(audit_id)
    except (OperationalError, DatabaseError):
        raise
    except Exception as exc:
        _fail_on_bug(audit_id, Audit.Phase.FINALIZING, exc)


def watchdog() -> str:
    return run_watchdog()

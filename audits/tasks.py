"""django-q2 entry points. Thin: ids in, the work is in crawling.py, finalize.py and watchdog.py.

Tasks record crawl failures on our own rows and return normally; they raise only
for "run me again" cases (the database was unavailable), which the lease table and
the watchdog then retry. Never pass model instances through the queue.
"""

import functools
import logging

from django.db import DatabaseError, OperationalError

from .crawling import run_chunk, run_resume, run_start
from .finalize import run_finalize
from .models import Audit
from .watchdog import run_watchdog

log = logging.getLogger(__name__)


def _records_failures(phase: str):
    """Run a task body; a programming error fails the audit with a code instead of vanishing.

    Database errors are re-raised: the database will come back, and the lease
    table and the watchdog retry the work (counting attempts), so they must not
    become an audit failure.
    """

    def decorate(body):
        @functools.wraps(body)
        def task(audit_id: int, *args):
            try:
                return body(audit_id, *args)
            except (OperationalError, DatabaseError):
                raise
            except Exception as exc:
                log.exception("audit %s: %s failed", audit_id, phase)
                audit = Audit.objects.filter(pk=audit_id).first()
                if audit is not None:
                    audit.fail(Audit.ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}", phase)
                return "failed"

        return task

    return decorate


@_records_failures(Audit.Phase.STARTING)
def start(audit_id: int) -> None:
    run_start(audit_id)


@_records_failures(Audit.Phase.CRAWLING)
def resume(audit_id: int) -> None:
    run_resume(audit_id)


@_records_failures(Audit.Phase.CRAWLING)
def crawl_chunk(audit_id: int, number: int) -> str:
    return run_chunk(audit_id, number)


@_records_failures(Audit.Phase.FINALIZING)
def finalize(audit_id: int) -> None:
    run_finalize(audit_id)


def watchdog() -> str:
    return run_watchdog()

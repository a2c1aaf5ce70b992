"""django-q2 entry points. Thin: ids in, the work is in crawl/, finalize.py and watchdog.py.

Tasks record crawl failures on our own rows and return normally; they raise only
for "run me again" cases (the database was unavailable), which the lease table and
the watchdog then retry. Never pass model instances through the queue.
"""

import functools
import logging

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError

from . import inlinks, notify, purge, schedules
from .crawl.chunk import run_chunk
from .crawl.db_retry import close_connection, storage_full
from .crawl.resume import run_resume
from .crawl.start import run_start
from .finalize import run_finalize
from .models import Audit
from .services import enqueue
from .watchdog import run_watchdog

log = logging.getLogger(__name__)


def _records_failures(phase: str):
    """Run a task body; a programming error fails the audit with a code instead of vanishing.

    Database errors are re-raised: the database will come back, and the lease
    table and the watchdog retry the work (counting attempts), so they must not
    become an audit failure. That includes Django's InterfaceError (not a
    DatabaseError) and a driver error that escaped Django's wrapping (psycopg's
    own, e.g. from COPY); the worker's connection is dropped so its next task
    reconnects.
    """
    def decorate(body):
        @functools.wraps(body)
        def task(audit_id: int, *args):
            try:
                return body(audit_id, *args)
            except (InterfaceError, psycopg.Error) as exc:
                log.warning("audit %s: database connection failed during %s: %s", audit_id, phase, exc)
                close_connection()
                raise
            except (OperationalError, DatabaseError) as exc:
                if storage_full(exc):
                    # Not transient: retrying would fill the queue with the same
                    # failure. Record it (small UPDATEs still fit) and stop.
                    log.error("audit %s: storage full during %s: %s", audit_id, phase, exc)
                    audit = Audit.objects.filter(pk=audit_id).first()
                    if audit is not None:
                        audit.fail(Audit.ErrorCode.STORAGE_FULL, str(exc)[:500], phase)
                    return "failed"
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
    if run_finalize(audit_id):
        # Alerts are for scheduled audits; the watchdog sends any this enqueue loses.
        if Audit.objects.filter(pk=audit_id, trigger=Audit.Trigger.SCHEDULE).exists():
            enqueue("audits.tasks.send_notifications", audit_id, name=f"audit-{audit_id}-notify")
        # The by-target index a page's "linked from" list reads, as a task of
        # its own: the audit is complete, and its report readable, without
        # waiting for a build of every edge (seconds for a big audit).
        try:
            enqueue("audits.tasks.index_links", audit_id, name=f"audit-{audit_id}-index-links")
        except DatabaseError:
            # The audit is complete; the watchdog indexes ended audits it finds
            # without their index, so this is a delay, not a failed finalize.
            log.warning("audit %s: the link index task was not enqueued; the watchdog will", audit_id,
                        exc_info=True)


def index_links(audit_id: int) -> str:
    return inlinks.build_ended(audit_id)


def watchdog() -> str:
    return run_watchdog()


def scheduled_run(site_id: int, due: str | None = None) -> str:
    """What a site's django-q2 Schedule calls (audits.schedules.FUNC)."""
    return schedules.run_due(site_id, due)


def send_notifications(audit_id: int) -> str:
    return notify.notify(audit_id)


def purge_audit(audit_id: int) -> None:
    """Delete an audit a person deleted (audits.purge.delete_soon)."""
    purge.purge_rows(audit_id)


def purge_site(site_id: int) -> None:
    """Delete a site a person deleted, and its audits (audits.purge.delete_site_soon)."""
    purge.purge_site_rows(site_id)

"""Deleting audits a batch of rows at a time.

An audit can hold millions of link edges. One cascading delete would hold
SQLite's write lock for minutes, so every running crawl waits out its busy
timeout, and on PostgreSQL it runs into the statement timeout and rolls back.
So the big tables lose an audit's rows in batches, each committed on its own
(call these outside a transaction: ``transaction.on_commit`` inside one), and
the audit row goes last through the ORM, whose cascade also takes what a
cancelled crawl's last sub-batch wrote meanwhile.
"""

from __future__ import annotations

from django.db import connection, transaction

from . import schedules
from .models import (
    Audit,
    FrontierURL,
    GoneIssue,
    Inlink,
    Issue,
    LinkEdge,
    Page,
    PageChange,
    RecheckedIssue,
    Site,
)
from .services import enqueue

# Rows a statement deletes: small enough that a crawl's writer waits well under a second for the lock.
BATCH = 20_000
# Children before what they point at (issues name their page); every table has an index led by audit.
BY_ID = [Issue, LinkEdge, PageChange, GoneIssue, RecheckedIssue, FrontierURL]


class AuditInUse(Exception):
    """A running delta crawl reuses the audit's rows: deleting them under it would corrupt its results."""


def reusers(audit: Audit) -> list[int]:
    """The active audits that reuse ``audit``'s rows (a delta crawl from it, or a validation of it)."""
    return list(Audit.objects.filter(source=audit, status__in=Audit.ACTIVE).values_list("pk", flat=True))


def delete_soon(audit: Audit) -> None:
    """Take ``audit`` off every screen now and leave deleting its rows to a worker (``purge_rows``).

    A big audit's rows take minutes to go, longer than a browser or a proxy waits
    for an answer. Refused (``AuditInUse``) while an active audit reuses its rows;
    the watchdog enqueues the deletion again should its task be lost.
    """
    _start_deleting(audit)
    enqueue("audits.tasks.purge_audit", audit.pk, name=f"audit-{audit.pk}-purge")


def purge_audit(audit: Audit) -> None:
    """Delete ``audit`` and everything it holds now, the big tables in committed batches (see ``delete_soon``)."""
    _start_deleting(audit)
    purge_rows(audit.pk)


def _start_deleting(audit: Audit) -> None:
    """Mark ``audit`` deleting, unless an active audit reuses its rows (``AuditInUse``), and cancel its own
    crawl: it may still write one last sub-batch, which the final cascade takes."""
    with transaction.atomic():
        # Locked, so no delta or validation can start from it between the check and the mark (services.new_audit).
        Audit.objects.select_for_update().filter(pk=audit.pk).first()
        if busy := reusers(audit):
            raise AuditInUse(f"Audit {audit.pk} cannot be deleted while audit {busy[0]}, which reuses its results, "
                             f"is running: wait for it to end or cancel it first.")
        Audit.objects.filter(pk=audit.pk).update(deleting=True)
    # Nothing to index: the watchdog would otherwise build its link index while its edges go.
    audit.mark_links_indexed()
    if audit.is_active:
        audit.cancel()


def purge_rows(audit_id: int) -> None:
    """Delete a deleting audit's rows, the big tables in committed batches, then the audit; run again, it goes on."""
    quote = connection.ops.quote_name
    for model in BY_ID:
        table = quote(model._meta.db_table)
        delete_batches(f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE audit_id = %s LIMIT %s)",
                        audit_id)
    # A page an issue of a late sub-batch names is left to the cascade, not a foreign key failure.
    pages, issues = quote(Page._meta.db_table), quote(Issue._meta.db_table)
    delete_batches(f"DELETE FROM {pages} WHERE id IN (SELECT p.id FROM {pages} p WHERE p.audit_id = %s AND NOT "
                    f"EXISTS (SELECT 1 FROM {issues} i WHERE i.page_id = p.id) LIMIT %s)", audit_id)
    # Inlink's key is (audit, target, tag, edge): no id to batch by.
    table = quote(Inlink._meta.db_table)
    delete_batches(f"DELETE FROM {table} WHERE (audit_id, target_hash, tag, edge_id) IN "
                    f"(SELECT audit_id, target_hash, tag, edge_id FROM {table} WHERE audit_id = %s LIMIT %s)",
                    audit_id)
    for audit in Audit.objects.filter(pk=audit_id, deleting=True):
        audit.delete()


def purge_site(site: Site) -> None:
    """Delete ``site``, its audits (each in batches) and the rest it holds now (see ``delete_site_soon``)."""
    _start_deleting_site(site)
    purge_site_rows(site.pk)


def delete_site_soon(site: Site) -> None:
    """Take ``site`` and its audits off every screen now, and leave deleting them to a worker (``purge_site_rows``).

    Its schedule goes and its active audits are cancelled first, so no audit
    starts or crawls on while the older ones are deleted.
    """
    _start_deleting_site(site)
    enqueue("audits.tasks.purge_site", site.pk, name=f"site-{site.pk}-purge")


def _start_deleting_site(site: Site) -> None:
    schedules.remove(site.pk)
    Site.objects.filter(pk=site.pk).update(deleting=True)
    for audit in site.audits.filter(status__in=Audit.ACTIVE):
        audit.cancel()


def purge_site_rows(site_id: int) -> None:
    """Delete a deleting site's audits, oldest first, then the site; run again, it goes on."""
    for audit in Audit.objects.filter(site_id=site_id).order_by("pk"):
        purge_audit(audit)
    Site.objects.filter(pk=site_id, deleting=True).delete()


def delete_batches(sql: str, audit_id: int) -> None:
    """Run one table's batch DELETE of ``audit_id``'s rows until none are left, committing each batch."""
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [audit_id, BATCH])
            if cursor.rowcount < BATCH:
                return

"""Deleting audits a batch of rows at a time.

An audit can hold millions of link edges. One cascading delete would hold
SQLite's write lock for minutes, so every running crawl waits out its busy
timeout, and on PostgreSQL it runs into the statement timeout and rolls back.
So the big tables lose an audit's rows in batches, each committed on its own,
and the audit row goes last through the ORM, which also sweeps up what a
writer still inserted meanwhile.
"""

from __future__ import annotations

from django.db import connection, transaction

from .models import Audit, FrontierURL, GoneIssue, Inlink, Issue, LinkEdge, Page, PageChange, Site

# Rows a statement deletes: small enough that a crawl's writer waits well under a second for the lock.
BATCH = 20_000
# Children before what they point at (issues name their page); every table has an index led by audit.
BY_ID = [Issue, LinkEdge, PageChange, GoneIssue, FrontierURL, Page]


def purge_audit(audit: Audit) -> None:
    """Delete ``audit`` and everything it holds, the big tables in committed batches.

    A running crawl is cancelled first, so its workers see it ended (or its
    row gone) and write nothing more.
    """
    if audit.is_active:
        audit.cancel()
    quote = connection.ops.quote_name
    for model in BY_ID:
        table = quote(model._meta.db_table)
        _delete_batches(f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE audit_id = %s LIMIT %s)",
                        audit.pk)
    # Inlink's key is (audit, target, tag, edge): no id to batch by.
    table = quote(Inlink._meta.db_table)
    _delete_batches(f"DELETE FROM {table} WHERE (audit_id, target_hash, tag, edge_id) IN "
                    f"(SELECT audit_id, target_hash, tag, edge_id FROM {table} WHERE audit_id = %s LIMIT %s)",
                    audit.pk)
    audit.delete()


def purge_site(site: Site) -> None:
    """Delete ``site``, its audits (each through ``purge_audit``) and the rest it holds."""
    for audit in site.audits.order_by("pk"):
        purge_audit(audit)
    site.delete()


def _delete_batches(sql: str, audit_id: int) -> None:
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [audit_id, BATCH])
            if cursor.rowcount < BATCH:
                return

"""Query plans of frontier statements, read the same way on SQLite and PostgreSQL."""

from django.db import connection


def frontier_reads(sql: str, *, seqscan: bool = True) -> list[str]:
    """The plan's steps that read audits_frontierurl.

    ``seqscan=False`` takes sequential scans off the table on PostgreSQL: with
    or without statistics, one is then what a missing index looks like.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"SET LOCAL enable_seqscan = {'on' if seqscan else 'off'}")
            cursor.execute("EXPLAIN " + sql)
            return [row[0] for row in cursor.fetchall() if "audits_frontierurl" in row[0]]
        cursor.execute("EXPLAIN QUERY PLAN " + sql)
        return [row[-1] for row in cursor.fetchall() if "audits_frontierurl" in row[-1]]


def assert_probes_the_ids(sql: str) -> None:
    """Every read of the frontier goes through its primary key (a bitmap's heap visit names no index)."""
    reads = [step for step in frontier_reads(sql) if ("Scan" in step and "Heap Scan" not in step) or "SEARCH" in step]
    pkey = "audits_frontierurl_pkey" if connection.vendor == "postgresql" else "INTEGER PRIMARY KEY"
    assert reads and all(pkey in step for step in reads), reads

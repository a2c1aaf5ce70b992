"""Planner statistics that keep up with a running audit (PostgreSQL).

PostgreSQL plans from table statistics, and a running audit's rows are not in
them until the tables are analyzed again. Until then it takes the audit for a
row or two, and answers each ``audit_id = A AND url_hash IN (...)`` lookup by
walking every index entry of the audit and filtering: a cost that grows with
the crawl, paid once per sub-batch, so a crawl's lookups grow with its square.
Autovacuum catches up a minute or more later, if it runs at all; so a chunk
analyzes the crawl's tables itself whenever the audit has grown to twice what
the statistics know of it, about log2(pages) times in an audit.
"""

from __future__ import annotations

from django.db import connection

# Only the columns the crawl's lookups filter on: sampling the URL and text
# columns would be most of the cost.
TABLES = {
    "audits_frontierurl": ("audit_id", "url_hash"),
    "audits_page": ("audit_id", "url_hash"),
    "audits_linkedge": ("audit_id", "source_hash"),
}
# Below this many pages every lookup is cheap whatever the plan.
FIRST_PAGES = 1000

# What the frontier's statistics say of one audit: its share of the most
# common audit ids times the rows they were taken from (0 when not among them).
BELIEVED_SQL = """
    SELECT COALESCE(s.most_common_freqs[array_position(s.most_common_vals::text::bigint[], %s::bigint)], 0)
           * GREATEST(c.reltuples, 0)
    FROM pg_class c
    LEFT JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = c.relname AND s.attname = 'audit_id'
    WHERE c.oid = 'audits_frontierurl'::regclass
"""


def due(pages: int, believed: float) -> bool:
    """Whether an audit with ``pages`` known pages has outgrown the ``believed`` frontier rows of the statistics."""
    return pages >= FIRST_PAGES and pages >= 2 * believed


# The advisory lock one analyze at a time holds (any number that names nothing else of ours).
ANALYZE_LOCK = 0x5173_1A4E


def keep_up(audit_id: int, pages: int) -> bool:
    """Analyze the crawl's tables when the audit's ``pages`` have outgrown their statistics; whether it did.

    Run outside the chunk's write transaction: ANALYZE waits for another
    chunk's, and a long one must not hold the write's locks meanwhile. Only one
    runs at a time (a try of an advisory lock): chunks side by side cross the
    threshold together, and each would otherwise queue behind the others' ANALYZE
    for longer than its lease lasts, then lose its chunk to the watchdog.
    """
    if connection.vendor != "postgresql" or pages < FIRST_PAGES:
        return False
    with connection.cursor() as cursor:
        cursor.execute(BELIEVED_SQL, [audit_id])
        (believed,) = cursor.fetchone()
        if not due(pages, float(believed or 0)):
            return False
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [ANALYZE_LOCK])
        if not cursor.fetchone()[0]:
            return False  # another chunk is analyzing: its statistics will do for this one too
        try:
            cursor.execute("ANALYZE " + ", ".join(f"{table} ({', '.join(columns)})"
                                                  for table, columns in TABLES.items()))
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [ANALYZE_LOCK])
    return True

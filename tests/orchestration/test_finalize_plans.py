"""Finalize's link queries stay cheap on a big audit: they start from the few broken or
redirecting target pages, reach their edges through Inlink's index (built after the
crawl, so the crawl itself maintains no index by target), and the inlink count reads
only that index.

The plans are SQLite's (EXPLAIN QUERY PLAN). SQLite has no statistics on a fresh
audit, so without the CROSS JOIN it walks every link edge and looks up its target:
1.1 s instead of 0.01 s for links_to_redirects on a 956,280-edge audit
(RESULTS-product.md). PostgreSQL analyses the tables first and plans for itself.
"""

import pytest
from django.db import connection

from audits.finalize import BROKEN_LINKS_SQL, INLINKS_SQL, LINKS_TO_REDIRECTS_SQL, NOT_SITE_FAULTS

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's query plans"),
]


def plan(sql: str, params: list) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql.replace("%s", "?"), params)
        return [row[-1] for row in cursor.fetchall()]


@pytest.mark.parametrize(
    "sql, params",
    [(BROKEN_LINKS_SQL, [1, *NOT_SITE_FAULTS]), (LINKS_TO_REDIRECTS_SQL, [1])],
    ids=["broken_links", "links_to_redirects"],
)
def test_link_checks_start_from_target_pages_and_reach_edges_through_the_inlink_index(sql, params):
    steps = plan(sql, params)
    assert steps[0].startswith("SEARCH t "), steps
    assert steps[1].startswith("SEARCH i USING "), steps
    assert "INDEX sqlite_autoindex_audits_inlink_1 (audit_id=? AND target_hash=?" in steps[1], steps  # its key
    assert steps[2].startswith("SEARCH e USING INTEGER PRIMARY KEY"), steps


def test_the_inlink_count_reads_the_inlink_index_alone():
    steps = plan(INLINKS_SQL.replace("UPDATE audits_page SET inlinks = ", "SELECT ").split(" WHERE audit_id")[0]
                 + " FROM audits_page WHERE audit_id = %s", [1, 1])
    assert any("USING COVERING INDEX sqlite_autoindex_audits_inlink_1" in step for step in steps), steps


def test_the_crawl_maintains_no_index_of_link_edges_by_target():
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, "audits_linkedge")
    by_target = [name for name, info in indexes.items() if "target_hash" in (info["columns"] or [])]
    assert by_target == []

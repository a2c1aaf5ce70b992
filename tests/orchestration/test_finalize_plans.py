"""Finalize's link queries read each of the audit's edges once, through indexes the
crawl keeps anyway, and need no index by target (the crawl maintains none, and
Inlink is built only after the audit has ended).

The plans are SQLite's (EXPLAIN QUERY PLAN). SQLite has no statistics on a fresh
audit: the CROSS JOIN keeps the edges first, each target then found by the pages'
unique key, instead of a walk of every page with a scan of edges for each.
PostgreSQL analyses the tables first and plans for itself.
"""

import pytest
from django.db import connection

from audits.finalize import (
    HREFLANG_RETURN_SQL,
    HREFLANG_TARGETS_SQL,
    HTML_TYPES,
    INLINKS_SQL,
    LINK_TARGETS_SQL,
    NOT_SITE_FAULTS,
)

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's query plans"),
]


def plan(sql: str, params: list) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql.replace("%s", "?"), params)
        return [row[-1] for row in cursor.fetchall()]


def test_link_checks_read_the_audits_edges_once_and_each_target_by_the_page_key():
    steps = plan(LINK_TARGETS_SQL, [1, *NOT_SITE_FAULTS])
    assert steps[0] == "SEARCH e USING INDEX link_audit_source (audit_id=?)", steps
    assert steps[1].startswith("SEARCH t USING ") and "(audit_id=? AND url_hash=?)" in steps[1], steps
    assert not any("audits_inlink" in step or "AUTOMATIC" in step or step.startswith("SCAN") for step in steps), steps


def test_the_inlink_count_groups_the_audits_edges_in_one_pass():
    steps = plan(INLINKS_SQL, [1, 1])
    edge_reads = [step for step in steps if "audits_linkedge" in step]
    assert edge_reads == ["SEARCH audits_linkedge USING INDEX link_audit_source (audit_id=?)"], steps
    assert "USE TEMP B-TREE FOR GROUP BY" in steps
    assert not any("audits_inlink" in step for step in steps), steps


def test_the_crawl_maintains_no_index_of_link_edges_by_target():
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, "audits_linkedge")
    by_target = [name for name, info in indexes.items() if "target_hash" in (info["columns"] or [])]
    assert by_target == []


def test_the_hreflang_checks_read_only_the_hreflang_edges():
    targets = plan(HREFLANG_TARGETS_SQL, [1, "blocked_by_robots", *HTML_TYPES])
    returns = plan(HREFLANG_RETURN_SQL, [1, *HTML_TYPES])
    assert targets[0] == "SEARCH e USING INDEX link_hreflang (audit_id=?)", targets
    assert returns[0] == "SEARCH e USING INDEX link_hreflang (audit_id=?)", returns
    assert "SEARCH r USING INDEX link_hreflang (audit_id=? AND source_hash=?)" in returns, returns

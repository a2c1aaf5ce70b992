"""Migration 0006 drops the index each per-audit table had on audit_id alone (every
other index of theirs leads with audit_id), without rebuilding the tables."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from audits.models import ChunkLease, FrontierURL, Issue, LinkEdge, Page

BEFORE = [("audits", "0005_link_edges_indexed_by_target_after_the_crawl")]
TABLES = [model._meta.db_table for model in (ChunkLease, FrontierURL, Issue, LinkEdge, Page)]


def lone_audit_indexes() -> dict[str, list[str]]:
    found = {}
    with connection.cursor() as cursor:
        for table in TABLES:
            constraints = connection.introspection.get_constraints(cursor, table)
            found[table] = [name for name, info in constraints.items()
                            if info["index"] and not info["primary_key"] and info["columns"] == ["audit_id"]]
    return found


def led_by_audit(table: str) -> int:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return sum(1 for info in constraints.values()
               if (info["index"] or info["unique"]) and info["columns"][:1] == ["audit_id"])


@pytest.fixture
def back_to_latest():
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # the schema the other tests expect


@pytest.mark.django_db
def test_per_audit_tables_have_no_index_on_audit_alone_but_keep_one_led_by_it():
    assert lone_audit_indexes() == {table: [] for table in TABLES}
    assert all(led_by_audit(table) >= 1 for table in TABLES)  # what audit_id lookups and cascades use


@pytest.mark.django_db(transaction=True)
def test_migrating_back_restores_the_indexes_and_forward_drops_them_again(back_to_latest):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    assert all(len(names) == 1 for names in lone_audit_indexes().values())
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert lone_audit_indexes() == {table: [] for table in TABLES}

"""config.sqlite_backend: Django's SQLite backend minus two costs of bulk writes, storing the same values.

The cursor and adapter tests use an in-memory sqlite3 connection of their own,
so they run in the PostgreSQL run too. The ORM round trip runs on both databases:
on SQLite it reads back what the adapter stored, on PostgreSQL what COPY stored."""

from __future__ import annotations

import sqlite3

import pytest

from config.sqlite_backend.base import SQLiteCursorWrapper


@pytest.fixture
def cursor():
    raw = sqlite3.connect(":memory:")
    yield raw.cursor(factory=SQLiteCursorWrapper)
    raw.close()


def test_a_statement_without_percent_signs_skips_the_placeholder_rewrite(cursor, monkeypatch):
    from django.db.backends.sqlite3 import base

    rewrites = []
    pattern = base.FORMAT_QMARK_REGEX
    monkeypatch.setattr(base, "FORMAT_QMARK_REGEX", type("Spy", (), {
        "sub": lambda self, *args: rewrites.append(args) or pattern.sub(*args)})())
    assert cursor.convert_query("INSERT INTO t VALUES (?, ?), (?, ?)") == "INSERT INTO t VALUES (?, ?), (?, ?)"
    assert rewrites == []
    # Django's own "format" queries still go through it, with the same result as before.
    assert cursor.convert_query("SELECT 1 WHERE a = %s AND b LIKE '50%%'") == "SELECT 1 WHERE a = ? AND b LIKE '50%'"
    assert len(rewrites) == 1
    assert cursor.convert_query("SELECT :a", param_names=["a"]) == "SELECT :a"


def test_booleans_are_bound_through_an_adapter_and_stored_as_sqlite_stored_them(cursor):
    # Found in the adapter table: no failed attribute lookup per value.
    assert sqlite3.adapters[(bool, sqlite3.PrepareProtocol)] is int
    cursor.execute("CREATE TABLE t (flag bool, n integer)")
    cursor.execute("INSERT INTO t VALUES (?, ?), (?, ?)", [True, 1, False, 0])
    assert cursor.execute("SELECT flag, typeof(flag), n FROM t").fetchall() == [(1, "integer", 1), (0, "integer", 0)]


@pytest.mark.django_db
def test_the_orm_reads_booleans_written_by_the_bulk_path_back_as_booleans():
    from django.contrib.auth.models import User

    from audits import bulk
    from audits.crawling import EDGE_COLUMNS
    from audits.models import Audit, LinkEdge

    audit = Audit.objects.create(owner=User.objects.create(username="u"), start_url="http://example.com/")
    row = (audit.pk, "a" * 32, "http://example.com/", "b" * 32, "http://example.com/b", "a", "B", True, False)
    bulk.append(LinkEdge, EDGE_COLUMNS, [row])
    edge = LinkEdge.objects.get()
    assert (edge.nofollow, edge.internal) == (True, False)

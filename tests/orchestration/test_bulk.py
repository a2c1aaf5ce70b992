"""The crawl's bulk writes: rows stored exactly as given, conflicts ignored with the first
row of a key kept, upserts keeping the last, on both databases (PostgreSQL through COPY:
bulk.append for link edges, a staging table for insert-or-ignore of COPY_MIN_ROWS rows
or more and for upserts of STAGED_UPSERT_MIN rows or more, which return what they stored).
"""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audits import bulk
from audits.crawling import (
    EDGE_COLUMNS,
    ISSUE_COLUMNS,
    PAGE_COLUMNS,
    PAGE_UPDATE_FIELDS,
    page_values,
)
from audits.models import Audit, Issue, LinkEdge, Page

# `.ci/run` runs the suite on SQLite and again on PostgreSQL, so a test marked
# for one database runs in one of the two passes.
only_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY and staging tables are PostgreSQL's")


@pytest.fixture
def audit(owner):
    return Audit.objects.create(owner=owner, start_url="http://127.0.0.1:9/")


# Text a page controls, with everything COPY's text format has to escape.
AWKWARD = ["plain", "", "tab\there", "new\nline", "back\\slash", "\\N", "quote ' and \"", "ünïcödé ✓ 链接"]


@pytest.mark.django_db
def test_appended_edges_are_stored_exactly_as_given(audit):
    rows = [
        (audit.pk, f"s{i:031d}", f"http://127.0.0.1:9/p/{i}", f"t{i:031d}", f"http://127.0.0.1:9/t/{i}",
         "a" if i % 2 else "img", text, i % 3 == 0, i % 2 == 0)
        for i, text in enumerate(AWKWARD * 3)
    ]
    bulk.append(LinkEdge, EDGE_COLUMNS, iter(rows))
    stored = list(LinkEdge.objects.filter(audit=audit).order_by("source_hash").values_list(*EDGE_COLUMNS))
    assert stored == sorted(rows, key=lambda row: row[1])


@pytest.mark.django_db
def test_appending_nothing_writes_nothing(audit):
    bulk.append(LinkEdge, EDGE_COLUMNS, [])
    assert not LinkEdge.objects.filter(audit=audit).exists()


def issue_rows(audit: Audit, count: int, message: str = "first") -> list[tuple]:
    now = bulk.db_datetime(timezone.now())
    return [
        (audit.pk, None, f"http://127.0.0.1:9/p/{i}", "title_missing", "critical",
         f"{message} {AWKWARD[i % len(AWKWARD)]}", "", f"key-{i}", Issue.Review.OPEN, now)
        for i in range(count)
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("count", [3, bulk.COPY_MIN_ROWS + 50, bulk.MULTIROW_ROWS + 7],
                         ids=["few rows", "staged rows", "more rows than one SQLite statement takes"])
def test_insert_or_ignore_keeps_the_first_row_of_each_key_and_stores_text_exactly(audit, count):
    first = issue_rows(audit, count)
    # Within one call, a repeated key keeps its first row ...
    bulk.insert(Issue, ISSUE_COLUMNS, first + issue_rows(audit, count, "repeat"))
    # ... and a later call cannot change a stored one.
    bulk.insert(Issue, ISSUE_COLUMNS, issue_rows(audit, count, "later"))
    stored = dict(Issue.objects.filter(audit=audit).values_list("key", "message"))
    assert stored == {row[7]: row[5] for row in first}


@pytest.mark.django_db
def test_staged_inserts_work_again_on_the_same_connection(audit):
    rows = issue_rows(audit, 3 * bulk.COPY_MIN_ROWS)
    for part in range(3):  # the staging table is emptied after each use
        bulk.insert(Issue, ISSUE_COLUMNS, rows[part * bulk.COPY_MIN_ROWS:(part + 1) * bulk.COPY_MIN_ROWS])
    assert Issue.objects.filter(audit=audit).count() == len(rows)


@pytest.mark.django_db
@only_postgresql
def test_many_rows_reach_postgresql_through_copy_and_one_insert(audit):
    with CaptureQueriesContext(connection) as queries:
        bulk.insert(Issue, ISSUE_COLUMNS, issue_rows(audit, bulk.COPY_MIN_ROWS))
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1 and "SELECT" in inserts[0] and "stage_audits_issue_" in inserts[0]
    assert Issue.objects.filter(audit=audit).count() == bulk.COPY_MIN_ROWS


def page_rows(audit: Audit, count: int, title: str) -> list[tuple]:
    now = bulk.db_datetime(timezone.now())
    return [
        page_values(Page(audit=audit, url=f"http://127.0.0.1:9/p/{i}", url_hash=f"h{i:031d}", depth=i,
                         final_url=f"http://127.0.0.1:9/p/{i}", title=f"{title} {AWKWARD[i % len(AWKWARD)]}"), now)
        for i in range(count)
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("count", [3, bulk.STAGED_UPSERT_MIN + 5], ids=["few rows", "staged rows"])
def test_upsert_updates_existing_rows_and_returns_what_it_stored_where_it_can(audit, count):
    first = page_rows(audit, count, "first")
    bulk.upsert(Page, PAGE_COLUMNS, first, conflict=["audit_id", "url_hash"], update=PAGE_UPDATE_FIELDS,
                returning=["url_hash", "id"])
    # The same keys again, each twice: the later row of a key is what stays.
    again = page_rows(audit, count, "stale") + page_rows(audit, count, "second")
    returned = bulk.upsert(Page, PAGE_COLUMNS, again, conflict=["audit_id", "url_hash"], update=PAGE_UPDATE_FIELDS,
                           returning=["url_hash", "id"])
    stored = dict(Page.objects.filter(audit=audit).values_list("url_hash", "title"))
    assert stored == {row[1]: row[PAGE_COLUMNS.index("title")] for row in page_rows(audit, count, "second")}
    staged = connection.vendor == "postgresql" and count >= bulk.STAGED_UPSERT_MIN
    multirow = connection.vendor == "sqlite" and connection.features.can_return_rows_from_bulk_insert
    if staged or multirow:
        # (SQLite returns a key's row once per row given: the same id both times.)
        assert dict(returned) == dict(Page.objects.filter(audit=audit).values_list("url_hash", "id"))
    else:
        assert returned is None  # the caller reads the rows back


@pytest.mark.django_db(transaction=True)
@only_postgresql
def test_the_staging_table_is_created_once_a_connection_after_a_commit_not_after_a_rollback(audit):
    rows = issue_rows(audit, 3 * bulk.COPY_MIN_ROWS)
    part = bulk.COPY_MIN_ROWS

    def creates(block) -> int:
        with CaptureQueriesContext(connection) as queries:
            block()
        return sum(q["sql"].startswith("CREATE TEMP TABLE") for q in queries.captured_queries)

    def rolled_back():
        with transaction.atomic():
            bulk.insert(Issue, ISSUE_COLUMNS, rows[:part])
            transaction.set_rollback(True)

    connection.close()  # a fresh session: no staging table yet
    assert creates(rolled_back) == 1
    assert creates(lambda: bulk.insert(Issue, ISSUE_COLUMNS, rows[part:2 * part])) == 1  # the rollback dropped it
    assert creates(lambda: bulk.insert(Issue, ISSUE_COLUMNS, rows[2 * part:])) == 0
    assert Issue.objects.filter(audit=audit).count() == 2 * part


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "sqlite", reason="the multi-row INSERT is SQLite's path")
def test_sqlite_inserts_many_rows_a_statement_within_its_variable_limit(audit, monkeypatch):
    # A limit smaller than MULTIROW_ROWS rows' worth of variables: the limit decides.
    monkeypatch.setattr(bulk, "_sqlite_variable_limit", lambda: 25 * len(ISSUE_COLUMNS))
    rows = issue_rows(audit, 60)
    with CaptureQueriesContext(connection) as queries:
        bulk.insert(Issue, ISSUE_COLUMNS, rows)
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert [sql.count("), (") + 1 for sql in inserts] == [25, 25, 10]
    assert Issue.objects.filter(audit=audit).count() == 60


@pytest.mark.django_db(transaction=True)
@only_postgresql
def test_staging_tables_keep_no_rows_between_uses(audit):
    # Nothing vacuums a temp table: rows only deleted from it would be read
    # again by every later use on the connection.
    rows = issue_rows(audit, 400)

    def stage_size() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_relation_size(c.oid) FROM pg_class c WHERE c.relname LIKE 'stage_audits_issue_%%' "
                           "AND c.relpersistence = 't' AND pg_table_is_visible(c.oid)")
            return cursor.fetchone()[0]

    with transaction.atomic():  # one use, as a crawl's sub-batch makes
        bulk.insert(Issue, ISSUE_COLUMNS, rows[:100])
    assert stage_size() == 0  # emptied at commit
    with transaction.atomic():  # many uses in one transaction, as finalize makes
        for part in range(1, 4):
            bulk.insert(Issue, ISSUE_COLUMNS, rows[part * 100:(part + 1) * 100])
        assert stage_size() == 0
    assert Issue.objects.filter(audit=audit).count() == 400


@pytest.mark.django_db(transaction=True)
@only_postgresql
def test_a_stage_is_truncated_only_when_used_again_in_the_same_transaction(audit):
    # TRUNCATE gives the table a new file once a transaction: worth it only for reuse.
    rows = issue_rows(audit, 60)
    with transaction.atomic():  # a rolled-back transaction must not leave the stage marked as used
        bulk.insert(Issue, ISSUE_COLUMNS, rows[:20])
        transaction.set_rollback(True)
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        bulk.insert(Issue, ISSUE_COLUMNS, rows[20:40])
        bulk.insert(Issue, ISSUE_COLUMNS, rows[40:60])
    emptying = [q["sql"].rsplit(";", 1)[1].split()[0] for q in queries.captured_queries
                if q["sql"].startswith("INSERT INTO")]
    assert emptying == ["DELETE", "TRUNCATE"]
    assert Issue.objects.filter(audit=audit).count() == 40

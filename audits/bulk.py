"""Insert-or-ignore and upsert of many rows in one statement per row batch, without model instances.

The crawl writes ~100 rows a page (link edges, issues, frontier rows). Django's
bulk_create spends most of its time building model instances and compiling
per-value SQL (measured: ~45 ms of CPU a page on the benchmark corpus); an
INSERT over plain tuples does the same work in a small fraction of that: on
SQLite one multi-row statement per few hundred rows, on PostgreSQL COPY into a
staging table (or executemany for a handful of rows). ``ON CONFLICT`` is
understood by SQLite (3.24+) and PostgreSQL alike, which is what makes
re-inserting harmless.
"""

from __future__ import annotations

import itertools
import sqlite3
import weakref
import zlib
from collections.abc import Iterable, Sequence

from django.db import connection, transaction

BATCH = 2000
# Rows in one SQLite multi-row INSERT (fewer if SQLite's variable limit says so).
MULTIROW_ROWS = 500
# On PostgreSQL, an insert-or-ignore of at least this many rows goes through COPY
# into a staging table (below): two round trips, where executemany composes each
# row's SQL client-side and waits on the pipeline row by row.
COPY_MIN_ROWS = 10
# An upsert that returns its rows saves the read-back query, so it pays from fewer.
STAGED_UPSERT_MIN = 10


def _sql(table: str, columns: Sequence[str], conflict: Sequence[str], update: Sequence[str],
         values: str | None = None) -> str:
    quote = connection.ops.quote_name
    cols = ", ".join(quote(c) for c in columns)
    values = values or "(" + ", ".join(["%s"] * len(columns)) + ")"
    sql = f"INSERT INTO {quote(table)} ({cols}) VALUES {values} ON CONFLICT"
    if update:
        targets = ", ".join(quote(c) for c in conflict)
        changes = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in update)
        return f"{sql} ({targets}) DO UPDATE SET {changes}"
    return f"{sql} DO NOTHING"


def insert(model, columns: Sequence[str], rows: Iterable[tuple], *, conflict: Sequence[str] = (),
           update: Sequence[str] = ()) -> None:
    """Insert ``rows`` (tuples in ``columns`` order); ignore conflicts, or update ``update`` columns."""
    if connection.vendor == "sqlite":
        _insert_multirow(model._meta.db_table, columns, rows, conflict, update)
        return
    if connection.vendor == "postgresql" and not update:
        rows = rows if isinstance(rows, list) else list(rows)
        if len(rows) >= COPY_MIN_ROWS:
            _insert_staged(model, columns, rows)
            return
    sql = _sql(model._meta.db_table, columns, conflict, update)
    batch: list[tuple] = []
    with connection.cursor() as cursor:
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)


def _insert_multirow(table: str, columns: Sequence[str], rows: Iterable[tuple], conflict: Sequence[str],
                     update: Sequence[str], returning: Sequence[str] = ()) -> list[tuple]:
    """SQLite: many rows a statement (``VALUES (...), (...), ...``).

    The driver releases the GIL around each step of a statement, and
    executemany steps once a row: beside the busy crawl thread each release can
    cost a wait to get the GIL back, which made a sub-batch's 1,300 link edges
    take ~84 ms against ~14 ms with the crawl thread idle. One statement of many
    rows steps once. SQLite applies the rows in order, so of two rows with one
    key the later one updates (or the first one stays), as with executemany.
    """
    ncols = len(columns)
    per = max(1, min(MULTIROW_ROWS, _sqlite_variable_limit() // ncols))
    # Django rewrites %s to ? with a regex over the whole statement (~1 ms for
    # 1,000 rows); given ? it has nothing to replace. Its query log, though,
    # formats the SQL with %, so a logged connection gets %s.
    mark = "%s" if connection.queries_logged else "?"
    marks = "(" + ", ".join([mark] * ncols) + ")"
    back = " RETURNING " + ", ".join(connection.ops.quote_name(c) for c in returning) if returning else ""
    rows = iter(rows)
    found: list[tuple] = []
    with connection.cursor() as cursor:
        while part := list(itertools.islice(rows, per)):
            sql = _sql(table, columns, conflict, update, values=", ".join([marks] * len(part))) + back
            cursor.execute(sql, [value for row in part for value in row])
            if back:
                found.extend(cursor.fetchall())
    return found


def _sqlite_variable_limit() -> int:
    connection.ensure_connection()
    try:
        return connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    except AttributeError:  # Python < 3.11 has no getlimit; SQLite's old default
        return 999


def upsert(model, columns: Sequence[str], rows: list[tuple], *, conflict: Sequence[str], update: Sequence[str],
           returning: Sequence[str]) -> list[tuple] | None:
    """Insert ``rows`` or update ``update`` columns of the ones whose ``conflict`` key exists.

    On PostgreSQL, STAGED_UPSERT_MIN rows or more go through the COPY staging
    table, and the stored rows' ``returning`` columns come back from the same
    statement; so they do on SQLite 3.35+ (RETURNING), a row per row given.
    Otherwise the result is None and the caller reads the rows back. Of two
    rows with one key, the later one is stored, as a second statement would
    leave it.
    """
    if connection.vendor == "postgresql" and len(rows) >= STAGED_UPSERT_MIN:
        return _insert_staged(model, columns, rows, conflict=conflict, update=update, returning=returning)
    if connection.vendor == "sqlite" and connection.features.can_return_rows_from_bulk_insert:  # SQLite 3.35+
        return _insert_multirow(model._meta.db_table, columns, rows, conflict, update, returning)
    insert(model, columns, rows, conflict=conflict, update=update)
    return None


def append(model, columns: Sequence[str], rows: Iterable[tuple]) -> None:
    """Add ``rows`` to a table with no unique key but its id (nothing can conflict).

    PostgreSQL gets them through COPY: measured against the executemany above on
    50,000 issue-shaped rows, about a third of the client CPU (0.14-0.18 against
    0.50-0.55 s) and less wall time (0.41-0.51 against 0.72-0.86 s). SQLite has
    no COPY; it takes the multi-row INSERT.
    """
    if connection.vendor != "postgresql":
        insert(model, columns, rows)
        return
    quote = connection.ops.quote_name
    sql = f"COPY {quote(model._meta.db_table)} ({', '.join(quote(c) for c in columns)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def _insert_staged(model, columns: Sequence[str], rows: list[tuple], *, conflict: Sequence[str] = (),
                   update: Sequence[str] = (), returning: Sequence[str] = ()) -> list[tuple] | None:
    """PostgreSQL: COPY into a session temp table, then one INSERT ... SELECT from it.

    Measured on 50,000 issue-shaped rows: 0.14 s of client CPU against 0.52-0.69 s
    for executemany, and less wall time. Insert-or-ignore takes the rows in the
    order given (``_n``), so of two rows with one key the first wins, as with
    executemany. An upsert keeps the last row of a key (one INSERT may not update
    a row twice) and can return the stored rows. The staging table is emptied in
    the same round trip as the INSERT: each trip costs the database thread a wait
    for the GIL while the crawl thread is busy.

    Emptying: nothing vacuums a temp table, so rows only DELETEd stayed in it for
    the life of the connection and every later INSERT ... SELECT read them all
    again (finalize's 173,000 broken-link issues, 1,000 a statement in one
    transaction: 6.2 s, then 10.3 s on the same connection). The table is
    ``ON COMMIT DELETE ROWS``, which truncates it in place at each commit. Within
    a transaction, the first use DELETEs (cheap, and gone at commit) and later
    ones TRUNCATE, which costs a new file once a transaction, so is kept for
    transactions that use a stage again and again. Measured on 600 crawl-like
    transactions of 80 rows and 173 batches of 1,000 in one transaction:
    2.5 s and 2.3-2.5 s with TRUNCATE always, 2.1-2.5 s and 4.1-4.7 s with
    DELETE always, 1.7-2.0 s and 3.5-3.8 s with ON COMMIT and DELETE, and
    1.8-2.0 s and 2.1-2.2 s as done here.
    """
    quote = connection.ops.quote_name
    table = model._meta.db_table
    fields = {field.column: field for field in model._meta.concrete_fields}
    cols = ", ".join(quote(c) for c in columns)
    # One staging table per column list (a changed list gets a new one).
    stage = quote(f"stage_{table}_{zlib.crc32(','.join(columns).encode()):08x}")
    definition = ", ".join(f"{quote(c)} {fields[c].db_type(connection)}" for c in columns)
    if update:
        keys = ", ".join(quote(c) for c in conflict)
        changes = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in update)
        sql = (f"INSERT INTO {quote(table)} ({cols}) SELECT DISTINCT ON ({keys}) {cols} FROM {stage} "
               f"ORDER BY {keys}, _n DESC ON CONFLICT ({keys}) DO UPDATE SET {changes}")
    else:
        sql = f"INSERT INTO {quote(table)} ({cols}) SELECT {cols} FROM {stage} ORDER BY _n ON CONFLICT DO NOTHING"
    if returning:
        sql += " RETURNING " + ", ".join(quote(c) for c in returning)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        _ensure_stage(cursor, stage, definition)
        with cursor.cursor.copy(f"COPY {stage} ({cols}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        # No parameters, so both statements go in one round trip; the first one's rows come back.
        cursor.execute(f"{sql}; {_emptying(stage)} {stage}")
        return cursor.fetchall() if returning else None


# Stages used in each connection's open transaction, with the outermost atomic
# block that opened it: a new block is a new transaction, committed or rolled
# back. (One Atomic reused as a decorator would look like one transaction; that
# only costs a TRUNCATE where DELETE would do, and audits has none.)
_used: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _emptying(stage: str) -> str:
    outermost = connection.atomic_blocks[0]  # _insert_staged runs inside atomic()
    block, used = _used.get(connection.connection, (None, None))
    if block is not outermost:
        used = set()
        _used[connection.connection] = (outermost, used)
    if stage in used:
        return "TRUNCATE"
    used.add(stage)
    return "DELETE FROM"


# Staging tables each open PostgreSQL connection has, once a transaction that
# made one committed (a rolled-back CREATE leaves none). Keyed by the driver's
# connection object, so a reconnect starts empty.
_stages: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ensure_stage(cursor, stage: str, definition: str) -> None:
    """Create the session's staging table unless it surely exists: one round trip saved per use."""
    raw = connection.connection
    known = _stages.setdefault(raw, set())
    if stage in known:
        return
    # A temp table lives as long as the connection; IF NOT EXISTS covers a second
    # use before the creating transaction committed.
    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} ({definition}, _n bigserial) ON COMMIT DELETE ROWS")
    transaction.on_commit(lambda: known.add(stage))


def db_datetime(value):
    """A datetime as the backend stores it (SQLite: text; PostgreSQL: the datetime itself)."""
    return connection.ops.adapt_datetimefield_value(value)

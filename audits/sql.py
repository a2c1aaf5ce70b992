"""Many rows in one prepared statement, for the crawl's busiest tables (pages, issues, frontier rows; edges on SQLite).

Django's SQLite backend caps a statement at 999 parameters, so bulk_create compiles one for every few dozen
rows: plain tuples through the cursor's ``executemany`` made the 10,000-page audit 1.9x as fast on SQLite and
changed nothing on PostgreSQL (benchmarks/RESULTS.md, "insert_rows against bulk_create"). ``ON CONFLICT``
makes writing a row twice harmless.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from django.db import connection


def placeholders(count: int) -> str:
    """``%s, %s, ...``: ``count`` parameter markers for an IN list or a VALUES row."""
    return ", ".join(["%s"] * count)


def insert_rows(model, columns: Sequence[str], rows: Sequence[tuple], *, conflict: Sequence[str] = (),
                update: Sequence[str] = ()) -> None:
    """Insert ``rows`` (tuples in ``columns`` order); a row whose key exists is skipped, or
    has its ``update`` columns overwritten when ``update`` is given (``conflict`` names the key)."""
    if not rows:
        return
    quote = connection.ops.quote_name
    sql = (f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(map(quote, columns))}) "
           f"VALUES ({placeholders(len(columns))}) ON CONFLICT")
    if update:
        changes = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in update)
        sql += f" ({', '.join(map(quote, conflict))}) DO UPDATE SET {changes}"
    else:
        sql += " DO NOTHING"
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def db_datetime(value):
    """A datetime as the database driver takes it in a plain statement."""
    return connection.ops.adapt_datetimefield_value(value)


def stream_rows(sql: str, params: list, batch: int = 1000) -> Iterator[tuple]:
    """The rows of ``sql``, ``batch`` at a time: a server-side cursor on PostgreSQL (psycopg otherwise
    fetches the whole result before fetchmany returns), a plain one on SQLite. Memory stays flat."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(batch):
            yield from chunk

"""The frontier's lease, chunk and template indexes hold only the rows their
queries look for (pending, leased, pages), so a URL's lease and done updates
add no entries to the indexes it has left; the crawl's queries still find their
rows through them, on a frontier without planner statistics (every new
crawl's), on SQLite and PostgreSQL alike."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits import bulk
from audits.crawling import (
    FRONTIER_COLUMNS,
    _finish_chunk,
    _lease_fresh,
    _lease_urls,
    frontier_values,
)
from audits.models import FrontierURL, Page
from crawler.urls import url_hash

from .outcomes import parsed_page
from .plans import assert_probes_the_ids, frontier_reads

pytestmark = pytest.mark.django_db


def _fill(audit_id: int, number: int) -> None:
    """Thousands of rows in every state, as a crawl midway has."""
    rows = []
    for n in range(6000):
        state = (FrontierURL.State.DONE, FrontierURL.State.LEASED, FrontierURL.State.PENDING)[n % 3]
        kind = Page.Kind.PAGE if n % 5 == 0 else Page.Kind.RESOURCE
        rows.append(FrontierURL(
            audit_id=audit_id, url=f"https://filler.example/{n}", url_hash=url_hash(f"filler{n}"), kind=kind,
            depth=n % 7, state=state, chunk=number + 1 + n % 4 if state != FrontierURL.State.PENDING else None,
            template_key=f"tk{n % 40}" if kind == Page.Kind.PAGE else ""))
    bulk.insert(FrontierURL, FRONTIER_COLUMNS, [frontier_values(row) for row in rows])


def _captured(queries, *needles: str) -> str:
    return next(q["sql"] for q in queries.captured_queries if all(needle in q["sql"] for needle in needles))


def _assert_reads_through(sql: str, index: str) -> None:
    reads = frontier_reads(sql, seqscan=False)
    assert reads and all(index in step for step in reads), reads


def test_leasing_reads_pending_urls_shallowest_first_through_the_pending_only_index(chunk_writer):
    writer, _ = chunk_writer
    _fill(writer.audit.pk, writer.lease.number)
    with CaptureQueriesContext(connection) as queries:
        ids = _lease_fresh(writer.audit, writer.lease, 50)
    assert ids
    _assert_reads_through(_captured(queries, "SELECT", "ORDER BY", "depth"), "frontier_lease_order")


def test_a_retried_chunk_finds_the_urls_it_held_through_the_leased_only_index(chunk_writer):
    writer, items = chunk_writer
    _fill(writer.audit.pk, writer.lease.number)
    with CaptureQueriesContext(connection) as queries:
        again = _lease_urls(writer.audit, writer.lease)
    assert {item.id for item in again} == {item.id for item in items}
    _assert_reads_through(_captured(queries, "SELECT", '"chunk" =', "leased"), "frontier_audit_chunk")


def test_statements_by_row_id_probe_the_ids_not_a_partial_index(chunk_writer):
    writer, items = chunk_writer
    writer.hold(items)
    _fill(writer.audit.pk, writer.lease.number)
    with CaptureQueriesContext(connection) as queries:
        more = writer.top_up()
    assert more
    assert_probes_the_ids(_captured(queries, 'UPDATE "audits_frontierurl"', "'leased'"))  # the lease
    assert_probes_the_ids(_captured(queries, 'SELECT "audits_frontierurl"', '"id" ', '"chunk" ='))  # what it leased
    with CaptureQueriesContext(connection) as queries:
        assert _finish_chunk(writer.lease, unfinished=[item.id for item in more])
    assert_probes_the_ids(_captured(queries, 'UPDATE "audits_frontierurl"', "'pending'", '"id" '))  # the release


def test_the_trap_budget_counts_variants_through_the_pages_only_template_index(chunk_writer):
    writer, items = chunk_writer
    writer.hold(items)
    _fill(writer.audit.pk, writer.lease.number)
    page = parsed_page(items[0].url, *((f"{items[0].url}?month={n}", "month") for n in range(3)))
    with CaptureQueriesContext(connection) as queries:
        writer.write([page])
    _assert_reads_through(_captured(queries, "template_key", "GROUP BY"), "frontier_audit_template")



@pytest.mark.parametrize("index, condition", [
    ("frontier_lease_order", "state"), ("frontier_audit_chunk", "state"), ("frontier_audit_template", "kind"),
    ("page_audit_title", "kind"), ("page_audit_content_hash", "kind"), ("link_hreflang", "tag"),
])
def test_the_indexes_a_resource_row_or_a_state_change_need_not_touch_are_partial(index, condition):
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [index])
        else:
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s", [index])
        (definition,) = cursor.fetchone()
    assert condition in definition.partition(" WHERE ")[2], definition

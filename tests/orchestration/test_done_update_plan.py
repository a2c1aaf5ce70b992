"""On PostgreSQL a sub-batch marks its URLs done by their frontier row ids, so the
update probes the primary key however many rows the chunk holds and whatever the
planner's statistics (a new crawl's frontier has none)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits import bulk
from audits.crawling import FRONTIER_COLUMNS, frontier_values
from audits.models import FrontierURL
from crawler.urls import url_hash

from .outcomes import parsed_page

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's done-update and its plan"),
]


def test_a_sub_batch_marks_its_urls_done_through_the_primary_key(chunk_writer):
    writer, items = chunk_writer
    writer.hold(items)
    # The chunk holds thousands of other leased rows, as one that tops up does.
    audit, number = writer.audit.pk, writer.lease.number
    others = [FrontierURL(audit_id=audit, url=f"https://filler.example/{n}", url_hash=url_hash(f"filler{n}"),
                          state=FrontierURL.State.LEASED, chunk=number) for n in range(5000)]
    bulk.insert(FrontierURL, FRONTIER_COLUMNS, [frontier_values(row) for row in others])
    with CaptureQueriesContext(connection) as queries:
        writer.write([parsed_page(items[0].url)])
    update = next(q["sql"] for q in queries.captured_queries if "done AS (" in q["sql"])
    assert FrontierURL.objects.get(pk=items[0].id).state == FrontierURL.State.DONE
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + update)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    reads = [line for line in plan.splitlines() if "Scan" in line and "audits_frontierurl" in line]
    assert reads and all("audits_frontierurl_pkey" in line for line in reads), plan

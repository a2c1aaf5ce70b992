"""A sub-batch marks its URLs done by their frontier row ids, so the update probes
the primary key however many rows the chunk holds and whatever the planner knows
(a new crawl's frontier has no statistics): by audit and URL hash, PostgreSQL read
the chunk's every row through the (audit, chunk) index."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits import bulk
from audits.crawling import FRONTIER_COLUMNS, frontier_values
from audits.models import FrontierURL
from crawler.urls import url_hash

from .outcomes import parsed_page
from .plans import assert_probes_the_ids

pytestmark = pytest.mark.django_db


def _done_update(writer, outcome) -> str:
    with CaptureQueriesContext(connection) as queries:
        writer.write([outcome])
    if connection.vendor == "postgresql":
        return next(q["sql"] for q in queries.captured_queries if "done AS (" in q["sql"])
    return next(q["sql"] for q in queries.captured_queries
                if q["sql"].startswith('UPDATE "audits_frontierurl" SET "state"') and "'done'" in q["sql"])


def test_a_sub_batch_marks_its_urls_done_through_the_primary_key(chunk_writer):
    writer, items = chunk_writer
    writer.hold(items)
    # The chunk holds thousands of other leased rows, as one that tops up does.
    audit, number = writer.audit.pk, writer.lease.number
    others = [FrontierURL(audit_id=audit, url=f"https://filler.example/{n}", url_hash=url_hash(f"filler{n}"),
                          state=FrontierURL.State.LEASED, chunk=number) for n in range(5000)]
    bulk.insert(FrontierURL, FRONTIER_COLUMNS, [frontier_values(row) for row in others])
    update = _done_update(writer, parsed_page(items[0].url))
    assert FrontierURL.objects.get(pk=items[0].id).state == FrontierURL.State.DONE
    assert_probes_the_ids(update)

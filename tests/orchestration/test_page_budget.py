"""The page budget: exact at max_pages, and no count of the frontier while far from it."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits.crawl.chunk import run_chunk
from audits.inline import run_steps
from audits.models import Audit

from .starting import started

pytestmark = pytest.mark.django_db


def budget_counts(queries) -> list[str]:
    # The count of pages that used the budget (not the trap guard's per-template counts).
    return [q["sql"] for q in queries
            if q["sql"].startswith('SELECT COUNT(*) AS "__count" FROM "audits_frontierurl"')]


def run_chunks(dispatcher) -> list[str]:
    """Run the chunk steps the dispatcher holds; the frontier counts they made."""
    counts = []
    while dispatcher.steps and dispatcher.steps[0][0] == "chunk":
        _, audit_id, number = dispatcher.steps.pop(0)
        with CaptureQueriesContext(connection) as queries:
            assert run_chunk(audit_id, number, dispatcher) == "done"
        counts += budget_counts(queries.captured_queries)
    return counts


def test_far_below_its_page_limit_a_crawl_never_counts_the_frontier(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site, max_pages=1000)
    assert run_chunks(dispatcher) == []
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    assert audit.pages.filter(kind="page").count() == len(grid_site.page_paths())


def test_near_its_page_limit_a_crawl_counts_and_stops_exactly_at_it(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site, max_pages=15)
    assert run_chunks(dispatcher)  # within a chunk (10 URLs here) of the limit, it counts
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    assert audit.pages.filter(kind="page").count() == 15

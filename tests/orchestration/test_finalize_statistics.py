"""On PostgreSQL, finalize gives the planner statistics for a fresh audit's rows from a
small sample, and leaves the connection's own statistics target as it was."""

from itertools import pairwise

import pytest
from django.db import connection

from audits.finalize import FINALIZE_STATISTICS_TARGET, run_finalize
from audits.models import Audit
from tests.dashboard.factories import SITE, make_audit, make_link, make_page

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner statistics"),
]


def histogram_buckets(table: str, column: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_length(histogram_bounds::text::text[], 1) FROM pg_stats "
            "WHERE schemaname = current_schema() AND tablename = %s AND attname = %s",
            [table, column],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def statistics_target() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW default_statistics_target")
        return cursor.fetchone()[0]


def test_finalize_analyses_a_fresh_audit_with_a_small_sample_and_restores_the_target(owner):
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    urls = [f"{SITE}/page-{n:03d}" for n in range(60)]
    for url in urls:
        make_page(audit, url)
    for source, target in pairwise(urls):
        make_link(audit, source, target)
    before = statistics_target()

    assert run_finalize(audit.pk)

    # 60 distinct URLs: the default target (100) would keep all 60 as histogram
    # bounds; the finalize target keeps at most one more than itself.
    assert histogram_buckets("audits_page", "url") == FINALIZE_STATISTICS_TARGET + 1
    assert histogram_buckets("audits_linkedge", "target_hash") == FINALIZE_STATISTICS_TARGET + 1
    assert statistics_target() == before
    assert Audit.objects.get(pk=audit.pk).status == Audit.Status.COMPLETED

"""Finalize gives PostgreSQL's planner statistics for a fresh audit's rows from a small
sample, leaving the connection's own statistics target as it was; SQLite gets none
(its CROSS JOINs fix the order instead, see test_finalize_plans)."""

from itertools import pairwise

import pytest
from django.db import connection

from audits.finalize import FINALIZE_STATISTICS_TARGET, run_finalize
from audits.models import Audit
from tests.factories import SITE, make_audit, make_link, make_page

pytestmark = pytest.mark.django_db


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


def sqlite_statistics_rows() -> int:
    """Rows ANALYZE left in sqlite_stat1 for the audit tables (the table exists only once it ran)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'")
        if not cursor.fetchone()[0]:
            return 0
        cursor.execute("SELECT count(*) FROM sqlite_stat1 WHERE tbl LIKE 'audits_%'")
        return cursor.fetchone()[0]


def test_finalize_analyses_a_fresh_audit_with_a_small_sample_on_postgresql_only(owner):
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    urls = [f"{SITE}/page-{n:03d}" for n in range(60)]
    for url in urls:
        make_page(audit, url)
    for source, target in pairwise(urls):
        make_link(audit, source, target)
    before = statistics_target() if connection.vendor == "postgresql" else None

    assert run_finalize(audit.pk)

    assert Audit.objects.get(pk=audit.pk).status == Audit.Status.COMPLETED
    if connection.vendor != "postgresql":
        assert sqlite_statistics_rows() == 0
        return
    # 60 distinct URLs: the default target (100) would keep all 60 as histogram
    # bounds; the finalize target keeps one more than itself.
    assert histogram_buckets("audits_page", "url") == FINALIZE_STATISTICS_TARGET + 1
    assert histogram_buckets("audits_linkedge", "target_hash") == FINALIZE_STATISTICS_TARGET + 1
    assert statistics_target() == before

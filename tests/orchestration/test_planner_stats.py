"""A running audit's lookups keep their plan as it grows: the crawl analyzes its tables when it outgrows their statistics."""

import pytest
from django.db import connection, connections

from audits import planner_stats
from audits.crawl.admission import FRONTIER_COLUMNS, known_targets
from audits.inline import run_audit_inline
from audits.models import FrontierURL
from audits.planner_stats import FIRST_PAGES, due, keep_up
from audits.sql import insert_rows
from crawler.urls import url_hash
from tests.factories import make_audit
from tests.versioned_site import VersionedSite

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner statistics")


def test_statistics_are_due_once_the_audit_has_twice_the_rows_they_know_of():
    assert not due(FIRST_PAGES - 1, 0)  # a small audit's lookups are cheap whatever the plan
    assert due(FIRST_PAGES, 0)  # the statistics know nothing of it
    assert not due(3000, 2000)
    assert due(4000, 2000)


def _queue(audit, count: int, prefix: str) -> list[str]:
    urls = [f"https://shop.example/{prefix}/{n}" for n in range(count)]
    insert_rows(FrontierURL, FRONTIER_COLUMNS, [
        (audit.pk, url_hash(url), url, "page", 1, "https://shop.example/", "", False, True, "pending", None, "", 0,
         None, 0) for url in urls])
    return [url_hash(url) for url in urls]


def _estimated_rows(audit) -> int:
    """How many frontier rows PostgreSQL expects the audit to have: what its plans are costed on."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) SELECT url_hash FROM audits_frontierurl WHERE audit_id = %s", [audit.pk])
        return cursor.fetchone()[0][0]["Plan"]["Plan Rows"]


@postgres_only
@pytest.mark.django_db
def test_a_grown_audit_is_analyzed_so_its_plans_are_costed_on_its_real_size(admin_user):
    earlier = make_audit(admin_user)
    _queue(earlier, 2000, "earlier")
    with connection.cursor() as cursor:  # statistics that know only the earlier audit, as after its finalize
        cursor.execute("ANALYZE audits_frontierurl")
    running = make_audit(admin_user)
    hashes = _queue(running, 20_000, "running")
    assert not keep_up(running.pk, FIRST_PAGES - 1)
    assert _estimated_rows(running) < 100  # taken for a row or two: each IN lookup walks the whole audit

    assert keep_up(running.pk, 20_000)
    assert _estimated_rows(running) > 15_000
    assert len(known_targets(running.pk, hashes[:300])) == 300
    # The statistics know the audit now: no second analyze until it doubles again.
    assert not keep_up(running.pk, 20_000)
    assert keep_up(running.pk, 45_000)


@pytest.mark.django_db
def test_nothing_is_analyzed_on_sqlite_or_for_a_small_audit(admin_user):
    audit = make_audit(admin_user)
    assert not keep_up(audit.pk, FIRST_PAGES - 1)
    if connection.vendor == "sqlite":
        assert not keep_up(audit.pk, 50_000)


@pytest.mark.django_db
def test_a_crawl_checks_its_statistics_after_each_write_with_the_pages_it_knows_of(owner, fast_settings, monkeypatch):
    calls: list[tuple[int, int, bool]] = []
    real = planner_stats.keep_up

    def spy(audit_id: int, pages: int) -> bool:
        analyzed = real(audit_id, pages)
        calls.append((audit_id, pages, analyzed))
        return analyzed

    monkeypatch.setattr(planner_stats, "keep_up", spy)
    monkeypatch.setattr(planner_stats, "FIRST_PAGES", 20)  # a crawl small enough for a test
    with VersionedSite(60) as site:
        audit = make_audit(owner, start_url=site.url(), allow_private=True, check_external=False, max_pages=100)
        run_audit_inline(audit.pk)
    assert {audit_id for audit_id, _, _ in calls} == {audit.pk}
    pages = [pages for _, pages, _ in calls]
    assert pages == sorted(pages) and pages[-1] >= 60  # every write, as the audit grew
    analyzed = [pages for _, pages, did in calls if did]
    if connection.vendor == "postgresql":
        assert analyzed and analyzed[0] >= 20
    else:
        assert not analyzed


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_chunk_whose_audit_outgrew_the_statistics_leaves_the_analyze_to_one_already_running(admin_user):
    running = make_audit(admin_user)
    _queue(running, 3000, "running")
    other = connections.create_connection("default")  # another chunk's connection, analyzing now
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [planner_stats.ANALYZE_LOCK])
        assert not keep_up(running.pk, 3000)  # no wait behind it
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [planner_stats.ANALYZE_LOCK])
        assert keep_up(running.pk, 3000)
    finally:
        other.close()

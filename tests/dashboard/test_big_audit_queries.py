"""Screens and exports that read one audit's rows in an order an index gives, and admin lists that never
scan every audit's pages or issues: at 300,000 issues an audit, a sort of all of them is seconds a page."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audits.exports import link_rows
from audits.summary import issue_summary
from tests.factories import SITE, make_audit, make_finished_audit, make_issue, make_link

pytestmark = pytest.mark.django_db

sqlite_plans = pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="reads SQLite's EXPLAIN QUERY PLAN, which names each sort; PostgreSQL picks by its statistics",
)


def _plan(sql: str, params) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " | ".join(row[-1] for row in cursor.fetchall())


def _explained(queries, table: str) -> list[str]:
    """The plans of the captured SELECTs that read ``table`` with an ORDER BY."""
    plans = []
    for query in queries:
        sql = query["sql"]
        if sql.startswith("SELECT") and f'FROM "{table}"' in sql and "ORDER BY" in sql:
            plans.append(_plan(sql, ()))
    return plans


@sqlite_plans
def test_the_issues_in_the_order_found_come_from_an_index_not_a_sort(owner_client, owner):
    audit = make_finished_audit(owner)
    with CaptureQueriesContext(connection) as ctx:
        assert owner_client.get(reverse("issue-list", args=[audit.pk]), {"sort": "found"}).status_code == 200
    plans = _explained(ctx.captured_queries, "audits_issue")
    assert plans
    for plan in plans:
        assert "TEMP B-TREE" not in plan, plan


@sqlite_plans
def test_the_links_export_reads_edges_in_index_order(owner):
    audit = make_finished_audit(owner)
    make_link(audit, f"{SITE}/b", f"{SITE}/x")
    with CaptureQueriesContext(connection) as ctx:
        rows = list(link_rows(audit))
    assert rows
    plans = _explained(ctx.captured_queries, "audits_linkedge")
    assert plans
    for plan in plans:
        assert "TEMP B-TREE" not in plan and "link_audit_source" in plan, plan


def test_the_links_export_keeps_every_edge_with_its_target_status(owner):
    audit = make_finished_audit(owner)
    extra = make_link(audit, f"{SITE}/about", f"{SITE}/gone", anchor="old")
    rows = list(link_rows(audit))
    assert len(rows) == audit.links.count()
    assert (extra.source_url, extra.target_url, "a", "old", False, True, 404, "") in rows


@pytest.mark.parametrize("model, query", [("page", {"status": "4xx"}), ("issue", {"severity": "critical"})])
def test_the_admin_lists_of_an_audit_read_only_that_audits_rows(superuser_client, owner, model, query):
    audit = make_finished_audit(owner)
    make_finished_audit(owner)
    table = f"audits_{model}"
    url = reverse(f"admin:audits_{model}_changelist")
    with CaptureQueriesContext(connection) as ctx:
        response = superuser_client.get(url, {"audit__id__exact": audit.pk, **query})
    assert response.status_code == 200
    reads = [q["sql"] for q in ctx.captured_queries if f'FROM "{table}"' in q["sql"]]
    assert reads
    for sql in reads:
        # No COUNT of every audit's rows, no DISTINCT of a column over all of them for a filter's choices.
        assert '"audit_id" =' in sql, sql


@pytest.mark.parametrize("model", ["audit", "page", "issue", "notification"])
def test_the_admin_lists_never_read_an_audits_robots_body(superuser_client, owner, model):
    from audits.models import Notification

    audit = make_finished_audit(owner)
    Notification.objects.create(audit=audit, event="failed", channel="email")
    with CaptureQueriesContext(connection) as ctx:
        response = superuser_client.get(reverse(f"admin:audits_{model}_changelist"))
    assert response.status_code == 200 and response.context["cl"].result_list
    selects = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("SELECT")]
    assert selects and not [sql for sql in selects if "robots_body" in sql]


def test_the_admin_page_list_reads_pages_newest_first_by_their_key(superuser_client, owner):
    make_finished_audit(owner)
    with CaptureQueriesContext(connection) as ctx:
        response = superuser_client.get(reverse("admin:audits_page_changelist"))
    assert response.status_code == 200
    rows = [q["sql"] for q in ctx.captured_queries if 'FROM "audits_page"' in q["sql"] and "ORDER BY" in q["sql"]]
    assert rows
    for sql in rows:
        assert sql.split("ORDER BY")[1].strip().startswith('"audits_page"."id" DESC'), sql


@pytest.mark.parametrize("model", ["page", "issue", "notification"])
def test_the_admin_lists_leave_out_a_deleting_audits_rows_in_the_queries_they_make_anyway(superuser_client, owner,
                                                                                          model):
    """The filter rides on the join to each row's audit: no query a row, and on SQLite no sort of every row."""
    from audits.models import Audit, Notification

    def listed():
        with CaptureQueriesContext(connection) as ctx:
            response = superuser_client.get(reverse(f"admin:audits_{model}_changelist"))
        assert response.status_code == 200 and response.context["cl"].result_list
        return ctx.captured_queries

    def audit(start_url, *, deleting=False):
        made = make_finished_audit(owner, start_url=start_url)
        Notification.objects.create(audit=made, event="failed", channel="email")
        Audit.objects.filter(pk=made.pk).update(deleting=deleting)

    audit(f"{SITE}/", deleting=True)
    audit("https://other.example/")
    few = len(listed())
    for n in range(3):
        audit(f"https://other.example/{n}")
    queries = listed()
    assert len(queries) == few
    if connection.vendor == "sqlite":
        plans = _explained(queries, f"audits_{model}")
        assert plans
        for plan in plans:
            assert "TEMP B-TREE" not in plan, plan


# The issues table as the audit page links to it (review=active), by a severity or a type's row, and
# unfiltered: each in the default order (severity, type, found).
DEFAULT_ORDER_QUERIES = [
    {"review": "active"},
    {},
    {"review": "active", "severity": "critical"},
    {"review": "active", "severity": "notice", "code": "title_length"},
]


@sqlite_plans
@pytest.mark.parametrize("query", DEFAULT_ORDER_QUERIES)
def test_the_issues_by_severity_come_from_an_index_not_a_sort(owner_client, owner, query):
    audit = make_finished_audit(owner)
    with CaptureQueriesContext(connection) as ctx:
        assert owner_client.get(reverse("issue-list", args=[audit.pk]), query).status_code == 200
    plans = _explained(ctx.captured_queries, "audits_issue")
    assert plans
    for plan in plans:
        assert "TEMP B-TREE" not in plan and "issue_audit_rank" in plan, plan


@sqlite_plans
@pytest.mark.parametrize("sort", ["depth", "-depth"])
def test_the_pages_by_depth_come_from_an_index_not_a_sort(owner_client, owner, sort):
    audit = make_finished_audit(owner)
    with CaptureQueriesContext(connection) as ctx:
        assert owner_client.get(reverse("page-list", args=[audit.pk]), {"sort": sort}).status_code == 200
    plans = _explained(ctx.captured_queries, "audits_page")
    assert plans
    for plan in plans:
        assert "TEMP B-TREE" not in plan and "page_audit_depth" in plan, plan


@sqlite_plans
def test_the_issue_totals_are_counted_from_an_index_without_reading_the_issues(owner):
    audit = make_finished_audit(owner)
    with CaptureQueriesContext(connection) as ctx:
        assert issue_summary(audit)["total"]
    plans = [_plan(q["sql"], ()) for q in ctx.captured_queries if 'FROM "audits_issue"' in q["sql"]]
    assert plans
    for plan in plans:
        assert "COVERING INDEX issue_audit_severity_code" in plan, plan


@sqlite_plans
def test_a_mark_on_a_validation_reaches_the_audit_it_re_checked_through_indexes_alone(owner):
    """Audit.set_review finds the same issues on the site's other audits by key, and a re-anchored link by page and
    target: each by an index. OR-ed into one statement, SQLite read every issue row of every audit to find them."""
    from audits.models import Audit, Issue
    from audits.services import follow_up_fields

    source = make_finished_audit(owner)
    make_issue(source, "broken_link_internal", f"{SITE}/a", target_url=f"{SITE}/gone", key="old-anchor")
    check = make_audit(owner, **follow_up_fields(source, Audit.Mode.VALIDATE))
    make_issue(check, "broken_link_internal", f"{SITE}/a", target_url=f"{SITE}/gone", key="new-anchor")
    same = source.issues.get(code="meta_description_missing")
    make_issue(check, same.code, same.url, key=same.key)
    with CaptureQueriesContext(connection) as ctx:
        assert check.set_review(check.issues.all(), Issue.Review.IGNORED) == 2
    assert set(source.issues.filter(review=Issue.Review.IGNORED).values_list("key", flat=True)) == {
        "old-anchor", same.key}
    reads = [q["sql"] for q in ctx.captured_queries
             if q["sql"].startswith(("SELECT", "UPDATE")) and '"audits_issue"' in q["sql"]]
    assert reads
    for sql in reads:
        plan = _plan(sql, ())
        assert "SCAN" not in plan, (sql, plan)

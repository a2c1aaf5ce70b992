"""audits.sql.insert_rows: many rows in one prepared statement, harmless to repeat."""

import pytest

from audits.crawl.rows import PAGE_COLUMNS, PAGE_UPDATE_FIELDS, page_values
from audits.issue_rows import insert_issues, issue_for
from audits.models import Issue, Page
from audits.sql import insert_rows
from crawler.catalogue import finding
from crawler.page import PageOutcome
from crawler.types import FetchResult
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

URL = "https://example.com/a"


def stored(audit, status: int, depth: int) -> None:
    outcome = PageOutcome(URL, depth, FetchResult(URL, URL, status=status, content_type="text/html"), None, (), ())
    insert_rows(Page, PAGE_COLUMNS, [page_values(audit.pk, outcome, Page.Kind.PAGE)],
                conflict=["audit_id", "url_hash"], update=PAGE_UPDATE_FIELDS)


def test_a_second_write_of_a_page_updates_what_the_fetch_says_and_keeps_the_rest(owner):
    audit = make_audit(owner)
    stored(audit, 500, depth=1)
    stored(audit, 200, depth=7)  # a retried chunk fetched it again
    assert list(Page.objects.filter(audit=audit).values_list("status_code", "depth")) == [(200, 1)]


def test_an_issue_whose_key_exists_is_skipped(owner):
    audit = make_audit(owner)
    first = finding("title_missing", "first")
    insert_issues([issue_for(audit.pk, None, URL, first, key="k1"), issue_for(audit.pk, None, URL, first, key="k1")])
    insert_issues([issue_for(audit.pk, None, URL, finding("title_missing", "again"), key="k1")])
    assert list(Issue.objects.filter(audit=audit).values_list("message", flat=True)) == ["first"]


def test_no_rows_is_no_statement(owner, django_assert_num_queries):
    with django_assert_num_queries(0):
        insert_rows(Page, PAGE_COLUMNS, [])

"""Issue and page tables: filters, whitelisted sorting, count-free pagination, bounded queries."""

import pytest
from django.urls import reverse

from tests.factories import SITE, make_finished_audit, make_issue, make_page

pytestmark = pytest.mark.django_db


def rows(response, marker):
    return response.content.decode().count(marker)


@pytest.fixture
def audit(owner):
    return make_finished_audit(owner)


def test_the_issue_table_filters_by_severity_code_and_url_text(owner_client, audit):
    url = reverse("issue-list", args=[audit.pk])
    assert rows(owner_client.get(url), 'class="issue"') == 5
    assert rows(owner_client.get(url, {"severity": "critical"}), 'class="issue"') == 3
    response = owner_client.get(url, {"code": "broken_link_internal"})
    assert rows(response, 'class="issue"') == 2
    assert rows(owner_client.get(url, {"q": "/about"}), 'class="issue"') == 2
    assert rows(owner_client.get(url, {"severity": "critical", "q": "gone"}), 'class="issue"') == 3
    assert rows(owner_client.get(url, {"review": "ignored"}), 'class="issue"') == 0


def test_the_issue_table_links_link_issues_to_source_and_target_pages(owner_client, audit):
    gone = audit.pages.get(url=f"{SITE}/gone")
    home = audit.pages.get(url=f"{SITE}/")
    body = owner_client.get(reverse("issue-list", args=[audit.pk]), {"code": "broken_link_internal"}).content.decode()
    assert reverse("page-detail", args=[audit.pk, gone.pk]) in body
    assert reverse("page-detail", args=[audit.pk, home.pk]) in body


def test_unknown_filters_and_sort_keys_are_ignored_not_passed_to_the_database(owner_client, audit):
    url = reverse("issue-list", args=[audit.pk])
    response = owner_client.get(url, {"severity": "nope", "code": "x'; DROP", "sort": "password", "page": "abc"})
    assert response.status_code == 200 and rows(response, 'class="issue"') == 5
    response = owner_client.get(reverse("page-list", args=[audit.pk]), {"sort": "owner__password", "depth": "x"})
    assert response.status_code == 200 and rows(response, 'class="page-row"') == 7


def test_the_issue_table_sorts_by_severity_then_by_url(owner_client, audit):
    url = reverse("issue-list", args=[audit.pk])
    body = owner_client.get(url).content.decode()
    assert body.index('data-code="http_4xx"') < body.index('data-code="title_length"')
    body = owner_client.get(url, {"sort": "-severity"}).content.decode()
    assert body.index('data-code="title_length"') < body.index('data-code="http_4xx"')
    # By page URL: /about's issue before /gone's, and the other way round descending.
    body = owner_client.get(url, {"sort": "url"}).content.decode()
    assert body.index('data-code="title_length"') < body.index('data-code="http_4xx"')
    body = owner_client.get(url, {"sort": "-url"}).content.decode()
    assert body.index('data-code="http_4xx"') < body.index('data-code="title_length"')


def test_the_page_table_filters_by_status_class_type_depth_and_kind(owner_client, audit):
    url = reverse("page-list", args=[audit.pk])
    assert rows(owner_client.get(url, {"status": "4xx"}), 'class="page-row"') == 1
    assert rows(owner_client.get(url, {"status": "error"}), 'class="page-row"') == 1
    assert rows(owner_client.get(url, {"type": "text/css"}), 'class="page-row"') == 1
    assert rows(owner_client.get(url, {"depth": "0"}), 'class="page-row"') == 1
    assert rows(owner_client.get(url, {"kind": "page", "status": "2xx"}), 'class="page-row"') == 4
    assert rows(owner_client.get(url, {"q": "elsewhere"}), 'class="page-row"') == 1


def test_the_page_table_sorts_on_whitelisted_columns(owner_client, audit):
    url = reverse("page-list", args=[audit.pk])
    body = owner_client.get(url, {"sort": "-time"}).content.decode()
    assert body.index(f"{SITE}/old") < body.index(f"{SITE}/blog/") < body.index(f"{SITE}/gone")
    assert "sort=time" in body  # the active column's heading toggles the direction


def test_pagination_knows_the_next_page_without_counting(owner_client, owner, django_assert_max_num_queries):
    audit = make_finished_audit(owner)
    for n in range(120):
        page = make_page(audit, f"{SITE}/item/{n:03d}", depth=2)
        make_issue(audit, "h1_missing", page.url, page=page)
    url = reverse("page-list", args=[audit.pk])
    with django_assert_max_num_queries(4) as captured:
        first = owner_client.get(url)
    assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)
    assert rows(first, 'class="page-row"') == 50 and 'rel="next"' in first.content.decode()
    last = owner_client.get(url, {"page": 3})
    assert rows(last, 'class="page-row"') == 27 and 'rel="next"' not in last.content.decode()
    assert "Rows 101–127" in last.content.decode()

    with django_assert_max_num_queries(5) as captured:
        issues = owner_client.get(reverse("issue-list", args=[audit.pk]))
    assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)
    assert rows(issues, 'class="issue"') == 50


def test_an_htmx_filter_request_gets_only_the_table(owner_client, audit):
    for name, marker in (("issue-list", 'id="issue-table"'), ("page-list", 'id="page-table"')):
        response = owner_client.get(reverse(name, args=[audit.pk]), HTTP_HX_REQUEST="true")
        body = response.content.decode()
        assert marker in body and "<html" not in body and "<form" not in body

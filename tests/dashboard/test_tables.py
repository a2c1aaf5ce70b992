"""Issue and page tables: filters, whitelisted sorting, counted and numbered pagination, bounded queries."""

import pytest
from django.db import connection
from django.urls import reverse

from audits import diff
from audits.tables import MAX_PAGE_NUMBER, Window
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


def added_pages(owner):
    """A second audit of the site that added /blog/new, /blog/other and /new since the first."""
    make_finished_audit(owner)
    second = make_finished_audit(owner)
    for path in ("/blog/new", "/blog/other", "/new"):
        make_page(second, f"{SITE}{path}", depth=2)
    diff.record(second)
    return second


def test_the_changed_pages_table_filters_by_section_and_url_text(owner_client, owner):
    audit = added_pages(owner)
    url = reverse("page-list", args=[audit.pk])
    assert rows(owner_client.get(url, {"change": "added"}), 'class="page-change') == 3
    blog = owner_client.get(url, {"change": "added", "section": "/blog/"}).content.decode()
    assert blog.count('class="page-change') == 2 and f"{SITE}/new<" not in blog
    assert rows(owner_client.get(url, {"change": "added", "section": "/blog/", "q": "other"}),
                'class="page-change') == 1
    assert 'id="filters-not-applied"' not in blog


def test_the_changed_pages_table_names_the_filters_it_cannot_apply(owner_client, owner):
    audit = added_pages(owner)
    url = reverse("page-list", args=[audit.pk])
    response = owner_client.get(url, {"change": "added", "kind": "resource", "depth": "5", "status": ""},
                                HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.count('class="page-change') == 3
    note = body.split('id="filters-not-applied"')[1].split("</p>")[0]
    assert "Not applied to pages changed since the previous audit: Kind, Depth." in note
    assert "Status" not in note and "Content type" not in note


@pytest.mark.parametrize("depth", ["²", "１", "9" * 5000, "9" * 20])
def test_a_depth_of_digits_other_than_ascii_ones_or_too_many_is_ignored(owner_client, audit, depth):
    response = owner_client.get(reverse("page-list", args=[audit.pk]), {"depth": depth})
    assert response.status_code == 200 and rows(response, 'class="page-row"') == 7


@pytest.mark.parametrize("name, param", [
    ("issue-list", "q"), ("issue-list", "section"), ("page-list", "q"), ("page-list", "type"),
    ("page-list", "section"), ("broken-list", "q"), ("broken-sources", "target"),
])
def test_a_nul_in_a_text_filter_never_reaches_the_database(owner_client, audit, name, param):
    # PostgreSQL refuses NUL in text; SQLite takes it, so the test looks at the parameters sent.
    sent = []

    def record(execute, sql, params, many, context):
        if not many:
            sent.extend(str(value) for value in (params.values() if isinstance(params, dict) else params or ()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        response = owner_client.get(reverse(name, args=[audit.pk]), {param: f"{SITE}/gone\x00"})
    assert response.status_code == 200
    assert sent and not [value for value in sent if "\x00" in value]


def test_the_page_table_sorts_on_whitelisted_columns(owner_client, audit):
    url = reverse("page-list", args=[audit.pk])
    body = owner_client.get(url, {"sort": "-time"}).content.decode()
    assert body.index(f"{SITE}/old") < body.index(f"{SITE}/blog/") < body.index(f"{SITE}/gone")
    assert "sort=time" in body  # the active column's heading toggles the direction


def test_a_redirect_row_shows_the_status_it_answered_and_where_it_went(owner_client, audit):
    body = owner_client.get(reverse("page-list", args=[audit.pk]), {"q": "/old"}).content.decode()
    status = body.split('<td class="status">')[1].split("</td>")[0]
    assert ">301<" in status and "→" in status and "/about" in status and ">200<" not in status


def test_pagination_shows_the_total_and_numbered_pages_in_a_bounded_number_of_queries(
        owner_client, owner, django_assert_max_num_queries):
    audit = make_finished_audit(owner)
    for n in range(120):
        page = make_page(audit, f"{SITE}/item/{n:03d}", depth=2)
        make_issue(audit, "h1_missing", page.url, page=page)
    url = reverse("page-list", args=[audit.pk])
    with django_assert_max_num_queries(5) as captured:
        first = owner_client.get(url)
    # One count, of a LIMITed subquery: it stops at the deepest page the table can show.
    counts = [q["sql"] for q in captured.captured_queries if "COUNT(" in q["sql"].upper()]
    assert len(counts) == 1 and "LIMIT" in counts[0].upper()
    body = first.content.decode()
    assert rows(first, 'class="page-row"') == 50 and 'rel="next"' in body
    assert "Rows 1–50 of 127" in body
    assert 'aria-current="page">1<' in body and 'aria-label="Page 3"' in body
    last = owner_client.get(url, {"page": 3})
    assert rows(last, 'class="page-row"') == 27 and 'rel="next"' not in last.content.decode()
    assert "Rows 101–127 of 127" in last.content.decode()

    with django_assert_max_num_queries(7):  # with the types present, for the type filter
        issues = owner_client.get(reverse("issue-list", args=[audit.pk]))
    assert rows(issues, 'class="issue"') == 50
    assert "Rows 1–50 of 125" in issues.content.decode()


def test_page_links_keep_the_filters_and_sort_and_swap_only_the_table(owner_client, owner):
    audit = make_finished_audit(owner)
    for n in range(120):
        make_page(audit, f"{SITE}/item/{n:03d}", depth=2)
    body = owner_client.get(reverse("page-list", args=[audit.pk]),
                            {"q": "item", "sort": "-url", "page": 2}).content.decode()
    assert "Rows 51–100 of 120" in body
    nav = body.split('class="pagination"')[1].split("</nav>")[0]
    assert 'href="?' not in nav
    for number in (1, 3):
        href = f"{reverse('page-list', args=[audit.pk])}?q=item&amp;sort=-url&amp;page={number}"
        assert f'href="{href}"' in nav and f'hx-get="{href}"' in nav
    assert 'hx-target="#page-table"' in nav and 'aria-current="page">2<' in nav


def test_a_page_number_past_the_end_shows_the_last_page(owner_client, audit):
    response = owner_client.get(reverse("page-list", args=[audit.pk]), {"page": 40})
    assert rows(response, 'class="page-row"') == 7 and "Rows 1–7 of 7" in response.content.decode()


@pytest.mark.parametrize(("number", "last", "links"), [
    (1, 1, []),
    (1, 3, [1, 2, 3]),
    (1, 40, [1, 2, 3, None, 40]),
    (20, 40, [1, None, 18, 19, 20, 21, 22, None, 40]),
    (39, 40, [1, None, 37, 38, 39, 40]),
])
def test_page_numbers_are_the_first_a_few_around_the_current_and_the_last(number, last, links):
    page = Window([object()], number, number < last, 10, count=last * 10, cap=100_000)
    assert page.page_links == links


def test_a_table_larger_than_it_can_page_through_says_so():
    page = Window([object()], 1, True, 50, count=100_001, cap=100_000)
    assert page.count_capped and page.shown_count == 100_000 and page.num_pages == MAX_PAGE_NUMBER


def test_an_htmx_filter_request_gets_only_the_table(owner_client, audit):
    for name, marker in (("issue-list", 'id="issue-table"'), ("page-list", 'id="page-table"')):
        response = owner_client.get(reverse(name, args=[audit.pk]), HTTP_HX_REQUEST="true")
        body = response.content.decode()
        assert marker in body and "<html" not in body and 'class="filters"' not in body


def test_htmx_restoring_the_pages_table_from_history_gets_the_whole_page(owner_client, audit):
    # A Back past htmx's history cache asks with HX-Request too; a bare table would replace the page.
    response = owner_client.get(reverse("page-list", args=[audit.pk]), HTTP_HX_REQUEST="true",
                                HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    body = response.content.decode()
    assert "<html" in body and 'id="page-filters"' in body and 'id="page-table"' in body

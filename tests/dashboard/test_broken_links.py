"""Broken links by target: one row per dead URL, its status, how many pages link to it and from where."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audits.broken_views import PREVIEW, SOURCES_PER_PAGE
from audits.models import Audit, Issue
from audits.tables import PER_PAGE
from tests.dashboard.broken_data import DEAD, DOWN, GONE, SOURCES, add_sources, make_broken_audit
from tests.factories import SITE, make_finished_audit, make_page

pytestmark = pytest.mark.django_db

NEW_URLS = ["broken-list", "broken-sources", "export-broken", "export-xlsx", "export-report"]


def get_list(client, audit, **params):
    response = client.get(reverse("broken-list", args=[audit.pk]), params)
    assert response.status_code == 200
    return response


def table(response):
    return [(row["target_url"], row["sources"], row["links"]) for row in response.context["rows"]]


def get_sources(client, audit, target, **params):
    return client.get(reverse("broken-sources", args=[audit.pk]), {"target": target, **params},
                      HTTP_HX_REQUEST="true")


def test_it_groups_broken_link_issues_into_one_row_per_target_most_linked_first(owner_client, owner):
    audit = make_broken_audit(owner)
    response = get_list(owner_client, audit)
    # 9 broken-link issues from 7 pages: 3 targets. GONE is linked twice from s1
    # (two anchors): 4 linking pages, 5 links. Ties go by URL.
    assert table(response) == [(GONE, 4, 5), (DEAD, 2, 2), (DOWN, 2, 2)]
    assert response.context["totals"] == {"internal": 2, "external": 1, "pages": 7}
    body = response.content.decode()
    assert body.count('class="broken-target"') == 3
    assert f"{SITE}/old" not in body  # a link to a redirect is not a broken link


def test_each_row_shows_the_targets_status_or_failure_and_its_first_sources(owner_client, owner):
    audit = make_broken_audit(owner)
    rows = {row["target_url"]: row for row in get_list(owner_client, audit).context["rows"]}
    assert rows[GONE]["status_code"] == 404 and rows[GONE]["scope"] == "internal"
    assert rows[DOWN]["status_code"] == 500
    assert rows[DEAD]["status_code"] is None and rows[DEAD]["scope"] == "external"
    assert rows[DEAD]["failure"] == "Host name could not be resolved: elsewhere.example does not exist"
    # The first PREVIEW sources by URL, each once however many anchors it has.
    assert PREVIEW == 3
    assert [s["url"] for s in rows[GONE]["sources_preview"]] == SOURCES[:3]
    assert [s["url"] for s in rows[DOWN]["sources_preview"]] == [SOURCES[0], SOURCES[4]]
    assert all(s["page_id"] for row in rows.values() for s in row["sources_preview"])


def test_ignored_broken_links_leave_the_targets_table(owner_client, owner):
    audit = make_broken_audit(owner)
    audit.issues.filter(target_url=DEAD).update(review=Issue.Review.IGNORED)
    audit.issues.filter(target_url=GONE, url=SOURCES[1]).update(review=Issue.Review.IGNORED)
    # Reviewed is acknowledged, not fixed: it stays.
    audit.issues.filter(target_url=DOWN).update(review=Issue.Review.REVIEWED)
    response = get_list(owner_client, audit)
    assert table(response) == [(GONE, 3, 4), (DOWN, 2, 2)]
    rows = response.context["rows"]
    assert [s["url"] for s in rows[0]["sources_preview"]] == [SOURCES[0], SOURCES[2], SOURCES[3]]
    assert response.context["totals"] == {"internal": 2, "external": 0, "pages": 4}  # s1, s3, s4, s5


def test_a_target_with_more_sources_than_shown_can_be_expanded_to_all_of_them(owner_client, owner):
    audit = make_broken_audit(owner)
    body = get_list(owner_client, audit).content.decode()
    assert body.count('class="more-sources"') == 1  # GONE only: 4 sources, 3 shown
    response = get_sources(owner_client, audit, GONE)
    assert response.status_code == 200
    sources = [row["url"] for row in response.context["page_obj"].object_list]
    assert sources == SOURCES[:4]
    html = response.content.decode()
    assert "<html" not in html  # the partial alone, swapped into the row
    for url in SOURCES[:4]:
        assert url in html
    assert "(2 links)" in html  # s1 links to it with two anchors
    # Without htmx the same list is a page of its own.
    page = owner_client.get(reverse("broken-sources", args=[audit.pk]), {"target": GONE})
    assert page.status_code == 200 and "<html" in page.content.decode() and SOURCES[3] in page.content.decode()


def test_the_expanded_sources_of_a_much_linked_target_come_a_page_at_a_time(owner_client, owner):
    audit = make_broken_audit(owner)
    add_sources(audit, GONE, 2 * SOURCES_PER_PAGE + 10)
    first = get_sources(owner_client, audit, GONE)
    assert len(first.context["page_obj"].object_list) == SOURCES_PER_PAGE and first.context["page_obj"].has_next
    last = get_sources(owner_client, audit, GONE, page=3)
    assert len(last.context["page_obj"].object_list) == 14 and not last.context["page_obj"].has_next
    # The pager keeps the target and swaps the list in place.
    assert 'hx-target="closest .sources"' in first.content.decode()
    assert "target=https%3A%2F%2Fshop.example%2Fgone" in first.content.decode()


def test_sources_of_a_url_nobody_links_to_broken_answer_404(owner_client, owner):
    audit = make_broken_audit(owner)
    assert get_sources(owner_client, audit, f"{SITE}/fine").status_code == 404
    assert get_sources(owner_client, audit, "").status_code == 404


def test_it_filters_internal_or_external_targets_and_searches_their_urls(owner_client, owner):
    audit = make_broken_audit(owner)
    assert table(get_list(owner_client, audit, scope="external")) == [(DEAD, 2, 2)]
    assert table(get_list(owner_client, audit, scope="internal")) == [(GONE, 4, 5), (DOWN, 2, 2)]
    assert table(get_list(owner_client, audit, q="DOWN")) == [(DOWN, 2, 2)]
    assert table(get_list(owner_client, audit, scope="internal", q="elsewhere")) == []
    # An unknown scope is no filter.
    assert len(table(get_list(owner_client, audit, scope="'; DROP TABLE"))) == 3


def test_it_sorts_by_linking_pages_or_url_from_a_whitelist(owner_client, owner):
    audit = make_broken_audit(owner)
    assert [t for t, _, _ in table(get_list(owner_client, audit, sort="sources"))] == [DEAD, DOWN, GONE]
    assert [t for t, _, _ in table(get_list(owner_client, audit, sort="url"))] == [DEAD, DOWN, GONE]
    assert [t for t, _, _ in table(get_list(owner_client, audit, sort="-url"))] == [GONE, DOWN, DEAD]
    assert [t for t, _, _ in table(get_list(owner_client, audit, sort="owner__password"))] == [GONE, DEAD, DOWN]


def test_an_htmx_request_gets_the_table_alone(owner_client, owner):
    audit = make_broken_audit(owner)
    response = owner_client.get(reverse("broken-list", args=[audit.pk]), {"scope": "internal"},
                                HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="broken-table">') and "<html" not in body
    assert body.count('class="broken-target"') == 2


def test_targets_are_paginated_without_one_query_per_row(owner_client, owner):
    audit = make_broken_audit(owner)
    with CaptureQueriesContext(connection) as few:
        get_list(owner_client, audit)
    for n in range(PER_PAGE + 5):
        target = f"{SITE}/missing/{n:03d}"
        make_page(audit, target, status_code=410)
        add_sources(audit, target, 1)
    with CaptureQueriesContext(connection) as many:
        first = get_list(owner_client, audit)
    assert len(many) == len(few)
    assert len(first.context["rows"]) == PER_PAGE and first.context["page_obj"].has_next
    assert all(row["status_code"] in (404, 410, 500) or row["failure"] for row in first.context["rows"])
    second = get_list(owner_client, audit, page=2)
    assert len(second.context["rows"]) == 3 + PER_PAGE + 5 - PER_PAGE


def test_an_audit_without_broken_links_says_so(owner_client, owner):
    audit = make_finished_audit(owner)
    audit.issues.filter(code="broken_link_internal").delete()
    body = get_list(owner_client, audit).content.decode()
    assert 'id="no-broken"' in body and "No broken links found" in body


@pytest.mark.parametrize(("status", "phase", "said"), [
    (Audit.Status.FAILED, Audit.Phase.CRAWLING, "before them"),
    (Audit.Status.CANCELLED, Audit.Phase.STARTING, "before them"),
    (Audit.Status.FAILED, Audit.Phase.FINALIZING, "while they ran"),
])
def test_an_audit_that_stopped_before_its_cross_page_checks_does_not_claim_no_broken_links(
        owner_client, owner, status, phase, said):
    audit = make_finished_audit(owner, status=status, failed_phase=phase)
    audit.issues.filter(code="broken_link_internal").delete()
    body = get_list(owner_client, audit).content.decode()
    assert "No broken links found" not in body
    assert 'id="no-broken"' in body and "listed once its last writes have ended" in body
    note = re.sub(r"\s+", " ", body.split('id="cross-page-note"')[1].split("</p>")[0])
    assert "cross-page checks" in note and "run when a crawl finishes" in note and said in note
    # Once its writes are over, the links among what it fetched have been checked (inlinks.build).
    Audit.objects.filter(pk=audit.pk).update(links_indexed=True)
    body = get_list(owner_client, audit).content.decode()
    assert "No broken links among the pages fetched before it stopped" in body
    searched = owner_client.get(reverse("broken-list", args=[audit.pk]), {"q": "nothing-like-this"}).content.decode()
    assert "No broken link target matches" in searched


def test_a_running_audit_says_its_broken_links_come_when_the_crawl_finishes(owner_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    audit.issues.filter(code="broken_link_internal").delete()
    body = get_list(owner_client, audit).content.decode()
    assert "No broken links found" not in body and "listed once the crawl finishes" in body
    assert 'id="cross-page-note"' not in body


def test_the_audit_screens_link_to_the_broken_links_page(owner_client, owner):
    audit = make_finished_audit(owner)
    body = owner_client.get(reverse("issue-list", args=[audit.pk])).content.decode()
    assert f'href="{reverse("broken-list", args=[audit.pk])}"' in body


@pytest.mark.parametrize("name", NEW_URLS)
def test_every_new_url_answers_404_to_a_stranger(stranger_client, owner, name):
    audit = make_broken_audit(owner)
    response = stranger_client.get(reverse(name, args=[audit.pk]), {"target": GONE}, HTTP_HX_REQUEST="true")
    assert response.status_code == 404
    assert b"shop.example" not in response.content


@pytest.mark.parametrize("name", NEW_URLS)
def test_every_new_url_sends_anonymous_people_to_log_in(client, owner, name):
    audit = make_broken_audit(owner)
    response = client.get(reverse(name, args=[audit.pk]), {"target": GONE})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))

"""Triage on the issues table: mark chosen issues, or all matching a filter, reviewed, ignored or open again."""

import pytest
from django.test import Client
from django.urls import reverse

from audits.models import Audit, Issue
from tests.factories import SITE, make_finished_audit, make_issue, make_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def audit(owner):
    return make_finished_audit(owner)


def review_url(audit, query: str = "") -> str:
    return reverse("issue-review", args=[audit.pk]) + (f"?{query}" if query else "")


def ids(audit, **filters) -> list[int]:
    return list(Issue.objects.filter(audit=audit, **filters).order_by("id").values_list("id", flat=True))


def reviews(audit) -> dict[str, str]:
    return {f"{i.code} {i.url}": i.review for i in Issue.objects.filter(audit=audit)}


def test_it_marks_the_chosen_issues_ignored_and_redirects_back_to_the_filtered_table(owner_client, audit):
    broken = ids(audit, code="broken_link_internal")
    response = owner_client.post(review_url(audit, "severity=critical&sort=url&page=1"),
                                 {"mark": "ignored", "issue": broken})
    assert response.status_code == 302
    assert response["Location"] == reverse("issue-list", args=[audit.pk]) + "?severity=critical&sort=url&page=1"
    assert set(ids(audit, review="ignored")) == set(broken)
    page = owner_client.get(response["Location"]).content.decode()
    assert "Marked 2 issues ignored." in page


def test_ignored_issues_leave_the_totals_the_severity_counts_and_the_audit_list(owner_client, audit):
    owner_client.post(review_url(audit), {"mark": "ignored", "issue": ids(audit, code="broken_link_internal")})
    audit.refresh_from_db()
    # The factory's audit: 3 critical (http_4xx, two broken links), 1 warning, 1 notice.
    assert (audit.issues_critical, audit.issues_warning, audit.issues_notice) == (1, 1, 1)
    page = owner_client.get(audit.get_absolute_url()).content.decode()
    assert '<span class="sev-critical">1 critical</span>' in page
    assert 'id="code-broken_link_internal"' not in page  # every one ignored: the type leaves the summary
    ignored_link = reverse("issue-list", args=[audit.pk]) + "?review=ignored"
    assert f'<a href="{ignored_link}">2 ignored</a>' in page
    listing = owner_client.get(reverse("audit-list")).content.decode()
    assert "<td>1</td><td>1</td><td>1</td>" in listing


def test_reviewed_issues_still_count_and_open_again_brings_ignored_ones_back(owner_client, audit):
    broken = ids(audit, code="broken_link_internal")
    owner_client.post(review_url(audit), {"mark": "reviewed", "issue": broken})
    audit.refresh_from_db()
    assert audit.issues_critical == 3 and set(ids(audit, review="reviewed")) == set(broken)

    owner_client.post(review_url(audit), {"mark": "ignored", "issue": broken})
    owner_client.post(review_url(audit), {"mark": "open", "issue": broken})
    audit.refresh_from_db()
    assert audit.issues_critical == 3 and ids(audit, review="open") == ids(audit)


def test_an_htmx_request_gets_the_refreshed_table_whose_links_lead_to_the_list(owner_client, audit):
    notice = ids(audit, code="title_length")
    response = owner_client.post(review_url(audit, "review=open&sort=url"), {"mark": "ignored", "issue": notice},
                                 HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<div id="issue-table">')
    assert "<html" not in body and 'id="triage-result">Marked 1 issue ignored.' in body
    # The table was re-read with the same filters: the issue now ignored is no longer "open".
    assert body.count('class="issue"') == 4 and 'data-code="title_length"' not in body
    # Sort links and the form's next action keep pointing at the list and its filters, not at this POST URL.
    list_url = reverse("issue-list", args=[audit.pk])
    assert f'href="{list_url}?review=open&amp;sort=-url"' in body
    assert f'action="{review_url(audit, "review=open&amp;sort=url")}"' in body
    # The result was said in the table: no flash message waits to repeat it on the next page.
    assert "Marked 1 issue" not in owner_client.get(list_url).content.decode()


def test_all_matching_marks_what_the_filters_select_on_the_server(owner_client, audit, owner):
    blog = make_page(audit, f"{SITE}/blog/post", title="Post", depth=2)
    make_issue(audit, "title_length", blog.url, page=blog)
    make_issue(audit, "meta_description_missing", blog.url, page=blog)
    other = make_finished_audit(owner)
    listing = owner_client.get(reverse("issue-list", args=[audit.pk]), {"severity": "notice"}).content.decode()
    assert "All 2 issues matching this filter, on every page" in listing
    response = owner_client.post(review_url(audit, "section=/blog/&severity=notice"), {"mark": "ignored", "all": "1"})
    assert response.status_code == 302
    # Only the notice under /blog/: not the warning there, not the notice on /about, not another audit's.
    assert ids(audit, review="ignored") == ids(audit, code="title_length", url=blog.url)
    assert not Issue.objects.filter(audit=other, review="ignored").exists()


@pytest.mark.parametrize("mark", ["reviewed", "open"])
def test_all_matching_under_any_review_leaves_the_ignored_issues_ignored(owner_client, audit, mark):
    owner_client.post(review_url(audit), {"mark": "reviewed", "issue": ids(audit, code="http_4xx")})
    ignored = ids(audit, code="broken_link_internal")
    owner_client.post(review_url(audit), {"mark": "ignored", "issue": ignored})
    listing = owner_client.get(reverse("issue-list", args=[audit.pk])).content.decode()
    assert "All 5 issues matching this filter, on every page (the ignored ones stay ignored)" in listing
    response = owner_client.post(review_url(audit), {"mark": mark, "all": "1"}, follow=True)
    assert f"Marked {2 if mark == 'reviewed' else 1} issue" in response.content.decode()
    assert ids(audit, review="ignored") == ignored
    # Not reopened by a person, so the site's ignore rules still apply to them.
    assert not Issue.objects.filter(pk__in=ignored, reopened=True).exists()
    audit.refresh_from_db()
    assert audit.issues_critical == 1


def test_all_matching_the_ignored_filter_opens_them_again(owner_client, audit):
    ignored = ids(audit, code="broken_link_internal")
    owner_client.post(review_url(audit), {"mark": "ignored", "issue": ignored})
    listing = owner_client.get(reverse("issue-list", args=[audit.pk]), {"review": "ignored"}).content.decode()
    assert "All 2 issues matching this filter, on every page</label>" in listing
    owner_client.post(review_url(audit, "review=ignored"), {"mark": "open", "all": "1"})
    assert set(ids(audit, review="open")) == set(ids(audit)) - set(ids(audit, code="http_4xx", review="reviewed"))
    assert set(ids(audit, reopened=True)) == set(ignored)


def test_ids_of_another_audits_issues_change_nothing(owner_client, audit, owner, stranger):
    theirs = make_finished_audit(stranger, start_url="https://theirs.example/")
    mine_too = make_finished_audit(owner, start_url="https://other.example/")
    chosen = ids(theirs) + ids(mine_too)
    response = owner_client.post(review_url(audit), {"mark": "ignored", "issue": chosen})
    assert response.status_code == 302
    assert not Issue.objects.filter(review="ignored").exists()
    theirs.refresh_from_db()
    assert theirs.issues_critical == 3


@pytest.mark.parametrize("htmx", [False, True])
def test_ids_no_issue_can_have_change_nothing(owner_client, audit, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = owner_client.post(review_url(audit), {"mark": "ignored", "issue": ["99999999999999999999999", "0"]},
                                 **headers)
    assert response.status_code == (200 if htmx else 302)
    assert not Issue.objects.filter(review="ignored").exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_marking_with_nothing_chosen_says_so_instead_of_nothing_changed(owner_client, audit, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = owner_client.post(review_url(audit, "severity=critical"), {"mark": "ignored"}, follow=not htmx,
                                 **headers)
    body = response.content.decode()
    assert "Nothing chosen: tick the issues to mark" in body and "Nothing changed" not in body
    assert not Issue.objects.filter(review="ignored").exists()


def test_a_stranger_gets_404_and_nothing_changes(stranger_client, audit):
    for query in ("", "severity=critical"):
        response = stranger_client.post(review_url(audit, query), {"mark": "ignored", "all": "1"},
                                        HTTP_HX_REQUEST="true")
        assert response.status_code == 404 and b"shop.example" not in response.content
    assert not Issue.objects.filter(review="ignored").exists()


def test_an_anonymous_post_goes_to_the_login_page(client, audit):
    response = client.post(review_url(audit), {"mark": "ignored", "all": "1"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert not Issue.objects.filter(review="ignored").exists()


def test_it_refuses_get_and_an_unknown_mark(owner_client, audit):
    assert owner_client.get(review_url(audit)).status_code == 405
    assert owner_client.post(review_url(audit), {"mark": "deleted", "all": "1"}).status_code == 400
    assert owner_client.post(review_url(audit), {"mark": "ignored", "issue": "1; DROP"}).status_code == 400
    assert not Issue.objects.filter(review="ignored").exists()


def test_it_needs_the_csrf_token_and_accepts_the_header_htmx_sends(owner, audit):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    chosen = {"mark": "ignored", "issue": ids(audit, code="title_length")}
    assert client.post(review_url(audit), chosen).status_code == 403
    assert not Issue.objects.filter(review="ignored").exists()

    page = client.get(reverse("issue-list", args=[audit.pk]))
    token = page.context["csrf_token"]
    assert f'hx-headers=\'{{"X-CSRFToken": "{token}"}}\'' in page.content.decode()
    response = client.post(review_url(audit), chosen, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=str(token))
    assert response.status_code == 200 and ids(audit, review="ignored") == chosen["issue"]


def test_the_table_offers_checkboxes_for_issues_and_none_for_gone_ones(owner_client, owner):
    first = make_finished_audit(owner)
    second = make_finished_audit(owner)
    Issue.objects.filter(audit=second, code="title_length").delete()
    from audits import diff

    diff.record(second)
    listing = owner_client.get(reverse("issue-list", args=[second.pk])).content.decode()
    assert listing.count('name="issue"') == 4 and 'id="triage-form"' in listing
    fixed = owner_client.get(reverse("issue-list", args=[second.pk]), {"change": "fixed"}).content.decode()
    assert 'data-code="title_length"' in fixed
    assert 'name="issue"' not in fixed and 'id="triage-form"' not in fixed
    refused = owner_client.post(review_url(second, "change=fixed"), {"mark": "ignored", "all": "1"})
    assert refused.status_code == 400
    assert not Issue.objects.filter(review="ignored").exists() and first.status == Audit.Status.COMPLETED

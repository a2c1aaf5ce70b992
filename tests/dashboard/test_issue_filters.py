"""The issues table's type filter (only the types the audit has), its section filter (a path prefix),
and its review filter ("active": all but the ignored, what the audit page counts)."""

import re

import pytest
from django.urls import reverse

from audits import diff
from audits.models import Audit, Issue
from tests.factories import SITE, make_audit, make_finished_audit, make_issue, make_page

pytestmark = pytest.mark.django_db


def type_choices(body: str) -> list[str]:
    select = body[body.index('id="f-code"'):body.index("</select>", body.index('id="f-code"'))]
    return re.findall(r'<option value="([^"]*)"', select)


def test_the_type_filter_lists_only_the_types_this_audit_has_by_title(owner_client, owner):
    audit = make_finished_audit(owner)
    make_finished_audit(owner, start_url="https://other.example/")
    make_issue(make_finished_audit(owner, start_url="https://third.example/"), "soft_404", "https://third.example/")
    body = owner_client.get(reverse("issue-list", args=[audit.pk])).content.decode()
    # "Any", then Broken internal link, Meta description missing, Page returns 4xx, Title too short or too long.
    assert type_choices(body) == ["", "broken_link_internal", "meta_description_missing", "http_4xx", "title_length"]


def test_the_type_filter_keeps_the_types_of_gone_issues_and_the_one_selected(owner_client, owner):
    make_finished_audit(owner)
    second = make_finished_audit(owner)
    Issue.objects.filter(audit=second, code="title_length").delete()
    diff.record(second)  # title_length is now a fixed issue of the earlier audit
    url = reverse("issue-list", args=[second.pk])
    assert "title_length" in type_choices(owner_client.get(url).content.decode())
    chosen = owner_client.get(url, {"code": "soft_404"}).content.decode()
    assert '<option value="soft_404" selected>' in chosen and 'id="no-issues"' in chosen


def test_the_section_filter_shows_issues_on_urls_under_the_path_prefix(owner_client, owner):
    audit = make_finished_audit(owner)
    for path in ("/docs/intro", "/docs/api/ref", "/Docs/upper", "/docsearch", "/blog/docs/x"):
        page = make_page(audit, f"{SITE}{path}", title=path)
        make_issue(audit, "h1_missing", page.url, page=page)
    make_issue(audit, "h1_missing", "https://elsewhere.example/docs/x")
    url = reverse("issue-list", args=[audit.pk])
    for section in ("/docs/", "docs/"):
        body = owner_client.get(url, {"section": section}).content.decode()
        shown = re.findall(r'class="url"><a href="[^"]*">([^<]*)</a>', body)
        assert sorted(shown) == [f"{SITE}/docs/api/ref", f"{SITE}/docs/intro"]
        assert 'id="f-section" value="/docs/"' in body
    table = owner_client.get(url, {"section": "/docs/", "code": "h1_missing"}, HTTP_HX_REQUEST="true")
    assert table.content.decode().count('class="issue"') == 2


def test_a_type_count_on_the_audit_page_matches_the_list_it_links_to(owner_client, owner):
    audit = make_audit(owner, status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE, origin=SITE)
    for path, review in (("/a", Issue.Review.OPEN), ("/b", Issue.Review.OPEN), ("/c", Issue.Review.IGNORED)):
        make_issue(audit, "title_length", f"{SITE}{path}", review=review)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    row = body.split('id="code-title_length-notice"')[1].split("</tr>")[0]
    assert re.search(r"<td>2</td>", row)  # the ignored one is left out of the count...
    href = re.search(r'<a href="([^"]+)">', row).group(1).replace("&amp;", "&")
    listed = owner_client.get(href).content.decode()
    assert listed.count('class="issue"') == 2  # ...and of the list it links to
    assert '<option value="active" selected>' in listed


def test_a_new_issue_count_matches_the_issue_list_and_the_compare_list(owner_client, owner):
    first, second = make_finished_audit(owner), make_finished_audit(owner)
    make_issue(second, "h1_missing", f"{SITE}/blog/")
    make_issue(second, "h1_missing", f"{SITE}/about", review=Issue.Review.IGNORED)
    diff.record(second)
    assert second.change_counts["issues"]["new"]["warning"] == 1  # the ignored one is not counted
    body = owner_client.get(second.get_absolute_url()).content.decode()
    row = body.split('id="changes-new"')[1].split("</tr>")[0]
    href = re.search(r'<th scope="row"><a href="([^"]+)">', row).group(1).replace("&amp;", "&")
    assert owner_client.get(href).content.decode().count('class="issue"') == 1
    compare = owner_client.get(reverse("audit-compare", args=[second.pk, first.pk]), {"show": "new"})
    assert compare.content.decode().count('class="issue"') == 1


@pytest.mark.parametrize("link", ["link-issues", "nav-issues"])
def test_the_all_issues_links_list_what_the_audit_page_counts_leaving_the_ignored_out(owner_client, owner, link):
    audit = make_finished_audit(owner)
    audit.set_review(audit.issues.filter(code="title_length"), Issue.Review.IGNORED)
    page_url = audit.get_absolute_url() if link == "link-issues" else reverse("page-list", args=[audit.pk])
    body = owner_client.get(page_url).content.decode()
    href = re.search(rf'<a href="([^"]+)" id="{link}">', body).group(1).replace("&amp;", "&")
    listed = owner_client.get(href).content.decode()
    audit.refresh_from_db()
    assert listed.count('class="issue"') == audit.issues_total == 4
    assert 'data-code="title_length"' not in listed
    # The ignored are a filter away.
    assert '<option value="active" selected>' in listed and '<option value="ignored">' in listed

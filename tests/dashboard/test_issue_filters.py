"""The issues table's type filter (only the types the audit has) and its section filter (a path prefix)."""

import re

import pytest
from django.urls import reverse

from audits import diff
from audits.models import Issue
from tests.factories import SITE, make_finished_audit, make_issue, make_page

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

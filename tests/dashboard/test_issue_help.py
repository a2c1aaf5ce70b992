"""Every screen listing issues says, for each type it shows, why it matters and how to fix it."""

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from crawler.catalogue import CATALOGUE
from tests.factories import make_finished_audit

pytestmark = pytest.mark.django_db


def url_of(name, older, newer):
    if name == "issue-list":
        return reverse(name, args=[older.pk]) + "?code=http_4xx"
    if name == "page-detail":
        return reverse(name, args=[older.pk, older.pages.get(status_code=404).pk])
    return reverse(name, args=[newer.pk, older.pk]) + "?show=persisting"


@pytest.mark.parametrize("name", ["issue-list", "page-detail", "audit-compare"])
def test_it_explains_each_issue_type_shown_once_in_a_disclosure(owner_client, owner, name):
    older, newer = make_finished_audit(owner), make_finished_audit(owner)
    body = owner_client.get(url_of(name, older, newer)).content.decode()
    about = re.findall(r'<details class="issue-type" id="about-http_4xx">.*?</details>', body, re.S)
    assert len(about) == 1
    kind = CATALOGUE["http_4xx"]
    assert escape(kind.why) in about[0] and escape(kind.fix) in about[0]
    assert "<summary>" in about[0]


def test_a_type_with_many_rows_is_explained_once(owner_client, owner):
    audit = make_finished_audit(owner)
    body = owner_client.get(reverse("issue-list", args=[audit.pk])).content.decode()
    assert body.count('id="about-broken_link_internal"') == 1
    assert body.count('data-code="broken_link_internal"') == 2

"""Crawled text is only ever text: escaped, inside hx-disable, and never a javascript: link."""

import re

import pytest
from django.urls import reverse

from tests.factories import SITE, make_finished_audit, make_issue, make_link, make_page

pytestmark = pytest.mark.django_db

SCRIPT_TITLE = '<script>alert("owned")</script>'
ATTRIBUTE_TITLE = '" onmouseover="alert(1)" hx-get="/audits/1/delete/" hx-trigger="load'


@pytest.fixture
def hostile(owner):
    audit = make_finished_audit(owner)
    page = make_page(audit, f"{SITE}/evil?<b>x</b>", title=SCRIPT_TITLE, description=ATTRIBUTE_TITLE,
                     canonical="javascript:alert(1)")
    make_issue(audit, "title_length", page.url, page=page, message=ATTRIBUTE_TITLE,
               target_url="javascript:alert(document.cookie)")
    make_link(audit, page.url, "javascript:alert(2)", anchor=SCRIPT_TITLE)
    make_link(audit, f"{SITE}/", page.url, anchor=ATTRIBUTE_TITLE)
    return audit, page


def screens(client, audit, page):
    urls = [
        reverse("page-list", args=[audit.pk]),
        reverse("issue-list", args=[audit.pk]),
        reverse("page-detail", args=[audit.pk, page.pk]),
        reverse("page-detail", args=[audit.pk, audit.pages.get(url=f"{SITE}/").pk]),
        audit.get_absolute_url(),
    ]
    return {url: client.get(url).content.decode() for url in urls}


def test_crawled_text_is_escaped_everywhere(owner_client, hostile):
    audit, page = hostile
    for url, body in screens(owner_client, audit, page).items():
        assert "<script>alert" not in body, url
        assert 'hx-get="/audits/1/delete/"' not in body, url
        assert 'onmouseover="alert' not in body, url
    body = owner_client.get(reverse("page-detail", args=[audit.pk, page.pk])).content.decode()
    assert "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in body
    assert "&quot; onmouseover=&quot;alert(1)&quot; hx-get=&quot;/audits/1/delete/&quot;" in body


def test_crawled_fragments_sit_inside_hx_disable(owner_client, hostile):
    audit, page = hostile
    body = owner_client.get(reverse("page-detail", args=[audit.pk, page.pk])).content.decode()
    container = body.index('<div hx-disable id="page-detail">')
    assert container < body.index("&lt;script&gt;")
    table = owner_client.get(reverse("issue-list", args=[audit.pk])).content.decode()
    assert table.index("<tbody hx-disable>") < table.index("onmouseover=&quot;")
    pages = owner_client.get(reverse("page-list", args=[audit.pk])).content.decode()
    assert pages.index("<tbody hx-disable>") < pages.index("&lt;script&gt;")


def test_non_http_urls_are_never_rendered_as_links(owner_client, hostile):
    audit, page = hostile
    for url, body in screens(owner_client, audit, page).items():
        assert not re.search(r'href="\s*javascript:', body, re.IGNORECASE), url
    body = owner_client.get(reverse("issue-list", args=[audit.pk])).content.decode()
    assert '<span class="not-a-link">javascript:alert(document.cookie)</span>' in body

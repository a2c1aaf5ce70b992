"""Downloads of an audit of a hostile site: what its pages hold must never break or poison the files."""

from __future__ import annotations

import io

import pytest
from django.urls import reverse
from openpyxl import load_workbook

from audits.models import Audit, Page
from tests.audit_command import run_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db

# XML 1.0 forbids U+FFFE and U+FFFF; a page can still hold them, as character references.
NONCHARACTERS = (b'<!DOCTYPE html><html lang="en"><head><title>Sale&#xFFFF; today</title></head>'
                 b'<body><h1>Sale</h1><a href="/more">More&#xFFFE; deals</a></body></html>')
MORE = b'<!DOCTYPE html><html lang="en"><head><title>More deals</title></head><body><h1>More</h1></body></html>'


def crawl(site: ScriptedSite) -> Audit:
    assert run_audit(site.url("/"), "--allow-private", "--no-external", "--owner", "owner") in (0, 1)
    return Audit.objects.get()


def test_a_page_holding_xml_forbidden_characters_still_downloads_as_a_workbook(owner_client, owner, fast_settings):
    with ScriptedSite() as site:
        site.pages.update({"/": Answer(NONCHARACTERS), "/more": Answer(MORE)})
        audit = crawl(site)
    assert Page.objects.get(audit=audit, url=site.url("/")).title == "Sale\uffff today"  # as the page said
    response = owner_client.get(reverse("export-xlsx", args=[audit.pk]))
    assert response.status_code == 200
    book = load_workbook(io.BytesIO(b"".join(response.streaming_content)))
    pages = list(book["Pages"].iter_rows(values_only=True))
    assert ("Sale today", site.url("/")) in {(row[pages[0].index("title")], row[0]) for row in pages[1:]}
    links = list(book["Links"].iter_rows(values_only=True))
    assert "More deals" in {row[links[0].index("anchor_text")] for row in links[1:]}

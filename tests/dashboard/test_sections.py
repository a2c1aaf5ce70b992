"""Sections: pages filtered by path prefix, and the audit page's issue counts per top-level section."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audits.models import Audit, Issue, Page
from audits.sections import TOP_SECTIONS, clean_section, section_counts, section_of, under_section
from tests.factories import SITE, make_audit, make_finished_audit, make_issue, make_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def audit(owner):
    return make_audit(owner, origin=SITE)


def test_it_cleans_a_section_into_a_path_prefix():
    assert clean_section("docs/") == "/docs/"
    assert clean_section(" /docs/ ") == "/docs/"
    assert clean_section("/docs/?x=1") == "/docs/"
    assert clean_section("") == ""
    assert clean_section("/a b/") == ""


def test_it_names_the_first_path_segment_as_the_section():
    assert section_of(f"{SITE}/docs/intro/", SITE) == "/docs/"
    assert section_of(f"{SITE}/docs/", SITE) == "/docs/"
    assert section_of(f"{SITE}/about", SITE) == "/"
    assert section_of(f"{SITE}/", SITE) == "/"
    assert section_of(f"{SITE}/search?q=a/b", SITE) == "/"
    assert section_of("https://elsewhere.example/docs/", SITE) is None


def test_it_keeps_only_urls_under_the_section_case_sensitively(audit):
    for path in ("/docs/a", "/docs/b/c", "/Docs/x", "/docsy/", "/blog/1"):
        make_page(audit, f"{SITE}{path}")
    make_page(audit, "https://elsewhere.example/docs/a", kind=Page.Kind.EXTERNAL)
    urls = set(under_section(Page.objects.filter(audit=audit), audit, "/docs/").values_list("url", flat=True))
    assert urls == {f"{SITE}/docs/a", f"{SITE}/docs/b/c"}


def test_the_root_section_is_the_top_level_urls_it_counts(audit):
    for path in ("/", "/about", "/search?q=a/b", "/docs/a", "/blog/"):
        make_page(audit, f"{SITE}{path}")
    make_page(audit, "https://elsewhere.example/", kind=Page.Kind.EXTERNAL)
    pages = Page.objects.filter(audit=audit)
    urls = set(under_section(pages, audit, "/").values_list("url", flat=True))
    assert urls == {f"{SITE}/", f"{SITE}/about", f"{SITE}/search?q=a/b"}
    assert section_counts(pages, SITE)["sections"][0] == {"section": "/", "count": 3}


def test_it_leaves_the_queryset_alone_without_a_section(audit):
    make_page(audit, f"{SITE}/a")
    make_page(audit, f"{SITE}/b/")
    assert under_section(Page.objects.filter(audit=audit), audit, "").count() == 2


def test_it_counts_rows_per_section_in_the_database(audit):
    for i, path in enumerate(["/docs/a", "/docs/b", "/docs/c/d", "/blog/1", "/about", "/", "/search?q=a/b"]):
        make_issue(audit, "title_missing", f"{SITE}{path}", key=f"k{i}")
    make_issue(audit, "title_missing", "https://elsewhere.example/docs/x", key="ext")
    counts = section_counts(Issue.objects.filter(audit=audit), SITE)
    assert counts["sections"] == [
        {"section": "/", "count": 3}, {"section": "/docs/", "count": 3}, {"section": "/blog/", "count": 1},
    ]
    assert counts["other"] == 1
    assert counts["total"] == 8


def test_it_folds_sections_past_the_limit_into_other(audit):
    for i in range(5):
        for j in range(i + 1):
            make_issue(audit, "title_missing", f"{SITE}/s{i}/{j}", key=f"k{i}-{j}")
    counts = section_counts(Issue.objects.filter(audit=audit), SITE, limit=2)
    assert [s["section"] for s in counts["sections"]] == ["/s4/", "/s3/"]
    assert counts["other"] == 1 + 2 + 3


def test_the_audit_page_counts_issues_per_top_level_section_with_links_to_them(owner_client, owner):
    audit = make_audit(owner, origin=SITE, status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE)
    for i, path in enumerate(["/docs/a", "/docs/b/c", "/blog/1", "/about"]):
        make_issue(audit, "title_missing", f"{SITE}{path}", key=f"k{i}")
    make_issue(audit, "title_missing", f"{SITE}/docs/ignored", key="ign", review=Issue.Review.IGNORED)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    sections = body.split('id="sections"')[1].split("</section>")[0]
    issues = reverse("issue-list", args=[audit.pk])
    # Ignored issues are left out, as they are from the totals beside them.
    assert re.search(rf'<a href="{issues}\?section=/docs/&amp;review=active">/docs/</a></td><td>2</td>', sections)
    assert re.search(rf'<a href="{issues}\?section=/blog/&amp;review=active">/blog/</a></td><td>1</td>', sections)
    assert re.search(rf'<a href="{issues}\?section=/&amp;review=active">/</a> <small[^>]*>\(top-level pages\)</small></td><td>1</td>',
                     sections)


def test_the_audit_page_lists_twenty_sections_and_folds_the_rest(owner_client, owner):
    audit = make_audit(owner, origin=SITE, status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE)
    for n in range(25):
        for m in range(n + 1):
            make_issue(audit, "title_missing", f"{SITE}/s{n:02d}/{m}", key=f"{n}-{m}")
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    sections = body.split('id="sections"')[1].split("</section>")[0]
    assert sections.count('class="section-row"') == TOP_SECTIONS
    assert "/s24/" in sections and "/s04/" not in sections
    other = sections.split('id="section-other"')[1].split("</tr>")[0]
    assert "<td>15</td>" in other  # sections s00 to s04: 1 + 2 + 3 + 4 + 5 issues


def test_a_running_audit_leaves_the_section_counts_for_when_it_ends(owner_client, owner):
    audit = make_audit(owner, origin=SITE, status=Audit.Status.RUNNING, phase=Audit.Phase.CRAWLING)
    make_issue(audit, "title_missing", f"{SITE}/docs/a")
    assert 'id="sections"' not in owner_client.get(audit.get_absolute_url()).content.decode()


def test_the_pages_table_filters_by_section(owner_client, owner):
    audit = make_audit(owner, origin=SITE, status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE)
    for path in ("/docs/a", "/docs/b/", "/docsy", "/blog/1"):
        make_page(audit, f"{SITE}{path}")
    url = reverse("page-list", args=[audit.pk])
    body = owner_client.get(url, {"section": "/docs/"}).content.decode()
    assert body.count('class="page-row"') == 2 and f"{SITE}/docsy" not in body
    assert 'value="/docs/"' in body  # the filter shows what it is set to
    assert owner_client.get(url, {"section": "docs/"}).content.decode().count('class="page-row"') == 2


def test_counting_issues_by_section_works_out_each_rows_section_once(owner):
    """The section is an expression of SUBSTR and INSTR over the URL: at 300,000 issues, working it out a
    second time a row (to drop URLs off the origin) made the audit page's GROUP BY 1.6x slower."""
    audit = make_finished_audit(owner)
    with CaptureQueriesContext(connection) as ctx:
        counts = section_counts(Issue.objects.filter(audit=audit), audit.origin)
    assert counts["sections"]
    grouped = [q["sql"] for q in ctx.captured_queries if "GROUP BY" in q["sql"]]
    assert len(grouped) == 1 and grouped[0].count("CASE") == 1, grouped

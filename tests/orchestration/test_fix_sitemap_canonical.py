"""Canonical targets no link names are fetched (or, refused by robots.txt, recorded)
so finalize can judge them: a canonical pointing at a 404, a redirect, a noindex
page or a robots-blocked URL is reported though nothing links there. Found by a
real crawl of a loopback site."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite, html_page

pytestmark = pytest.mark.django_db


def page(title: str, *links: str, canonical: str = "", noindex: bool = False) -> Answer:
    head = (f'<link rel="canonical" href="{canonical}">' if canonical else "") + (
        '<meta name="robots" content="noindex">' if noindex else "")
    return html_page(title, *links, head=head)


def test_canonical_targets_nothing_links_to_are_checked_and_bad_ones_reported(owner, fast_settings):
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/robots.txt": Answer("User-agent: *\nDisallow: /private\n", ctype="text/plain"),
            "/": page("Home", "/a", "/b", "/c", "/d", "/f", "/g", "/h", canonical="/"),
            "/a": page("Names a page that is gone", "/", canonical="/gone"),
            "/b": page("Names a URL that redirects", "/", canonical="/moved"),
            "/moved": Answer(status=301, headers={"Location": "/b"}),
            "/c": page("Names a URL robots.txt refuses", "/", canonical="/private/copy"),
            "/d": page("Names a noindex page", "/", canonical="/hidden"),
            "/hidden": page("Not for the index", noindex=True),
            "/f": page("Names a good linked page", "/", canonical="/a"),
            "/g": page("Names a page another page links", "/", canonical="/target"),
            "/h": page("Links the target", "/target"),
            "/target": page("A good page", "/"),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, max_depth=3)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    bad = dict(Issue.objects.filter(audit=audit, code="canonical_bad_target").values_list("url", "message"))
    assert set(bad) == {site.url(p) for p in ("/a", "/b", "/c", "/d")}, bad
    assert "answered 404" in bad[site.url("/a")]
    assert "redirects" in bad[site.url("/b")]
    assert "blocked by robots" in bad[site.url("/c")]
    assert "noindex" in bad[site.url("/d")]
    # Each fetched once; the refused one never, and as no link names it, it is no blocked link either.
    assert [site.requests[p] for p in ("/gone", "/moved", "/hidden", "/target")] == [1, 1, 1, 1]
    assert site.requests["/private/copy"] == 0
    assert not Issue.objects.filter(audit=audit, code="blocked_by_robots").exists()
    # A canonical target a link also reaches is a linked page at its click depth.
    assert audit.pages.get(url=site.url("/target")).depth == 2
    assert audit.pages.get(url=site.url("/gone")).depth == audit.max_depth

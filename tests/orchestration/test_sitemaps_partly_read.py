"""Sitemaps read only in part: the walk's own limit is a notice of the audit, not a fault of the file
that crossed it (CHECKS #22 is about the file)."""

import functools

import pytest

from audits.crawl import start
from audits.inline import run_audit_inline
from crawler.sitemap import discover_sitemaps
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db


def urlset(*urls: str) -> str:
    return ('<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<url><loc>{u}</loc></url>" for u in urls) + "</urlset>")


def test_a_sitemap_walk_stopped_at_its_url_cap_is_a_notice_and_no_file_is_called_invalid(
        owner, fast_settings, monkeypatch):
    monkeypatch.setattr(start, "discover_sitemaps", functools.partial(discover_sitemaps, max_urls=3))
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/robots.txt": Answer(f"Sitemap: {site.url('/a.xml')}\nSitemap: {site.url('/b.xml')}\n",
                                  ctype="text/plain"),
            "/a.xml": Answer(urlset(site.url("/"), site.url("/a1")), ctype="application/xml"),
            "/b.xml": Answer(urlset(site.url("/b1"), site.url("/b2")), ctype="application/xml"),
            "/": Answer('<title>Home</title><a href="/a1">a1</a><a href="/b1">b1</a><a href="/b2">b2</a>'),
            "/a1": Answer("<title>a1</title>"), "/b1": Answer("<title>b1</title>"),
            "/b2": Answer("<title>b2</title>"),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    assert not audit.issues.filter(code="sitemap_invalid").exists()
    note = audit.issues.get(code="sitemaps_partly_read")
    assert (note.url, note.severity) == (site.url("/sitemap.xml"), "notice")
    assert note.message == "Sitemaps read in part: the cap of 3 sitemap URLs was reached."

"""A start URL the sitemap also lists is a sitemap URL too: its listing is judged like any other.
Found by a real crawl of a loopback site."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db


def test_a_start_page_the_sitemap_lists_is_in_the_sitemap_and_judged_as_a_listing(owner, fast_settings):
    site = ScriptedSite()
    with site:
        listed = ("/", "/listed")
        sitemap = "".join(f"<url><loc>{site.url(path)}</loc></url>" for path in listed)
        site.pages.update({
            "/robots.txt": Answer(f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n", ctype="text/plain"),
            "/sitemap.xml": Answer(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{sitemap}</urlset>',
                                   ctype="application/xml"),
            # A noindex page should not be in a sitemap, the start page no less than any other.
            "/": Answer('<!doctype html><html><head><title>Home</title><meta name="robots" content="noindex">'
                        '</head><body><h1>Home</h1><a href="/listed">listed</a></body></html>'),
            "/listed": Answer("<!doctype html><html><head><title>Listed</title></head><body><h1>Listed</h1>"
                              "</body></html>"),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert set(audit.pages.filter(in_sitemap=True).values_list("url", flat=True)) == {site.url("/"), site.url("/listed")}
    assert set(Issue.objects.filter(audit=audit, code="sitemap_bad_url").values_list("url", flat=True)) == {site.url("/")}
    assert not Issue.objects.filter(audit=audit, code="orphan_page").exists()
    # Its noindex is judged knowing the listing, as any listed page's is (CHECKS #17: escalated).
    noindex = Issue.objects.get(audit=audit, code="noindex")
    assert (noindex.url, noindex.severity) == (site.url("/"), "critical")
    assert noindex.message.endswith("but listed in the sitemap")

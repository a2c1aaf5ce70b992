"""Orphans are sitemap pages that no internal link reaches: a page reached through
a link to a URL that redirects to it is not one. Found by finalize after a real
crawl of a loopback site."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite
from tests.scripted_site import html_page as page

pytestmark = pytest.mark.django_db




def test_a_sitemap_page_reached_through_a_redirecting_link_is_not_an_orphan(owner, fast_settings):
    site = ScriptedSite()
    with site:
        sitemap = "".join(f"<url><loc>{site.url(path)}</loc></url>" for path in ("/", "/new", "/lonely"))
        site.pages.update({
            "/robots.txt": Answer(f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n", ctype="text/plain"),
            "/sitemap.xml": Answer(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{sitemap}</urlset>',
                                   ctype="application/xml"),
            "/": page("Home", "/old"),
            "/old": Answer(status=301, headers={"Location": "/new"}),
            "/new": page("New home of an old page", "/"),
            "/lonely": page("A page nothing links to", "/"),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    orphans = set(Issue.objects.filter(audit=audit, code="orphan_page").values_list("url", flat=True))
    assert orphans == {site.url("/lonely")}

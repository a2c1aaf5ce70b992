"""A sitemap page linked from a page at max_depth is linked, though the depth limit
stops the crawl from following the link: no orphan. A sitemap page linked only
from another sitemap-only page is reached by no link from the start page, so it
stays an orphan. Found by a real crawl of a loopback site."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite
from tests.scripted_site import html_page as page

pytestmark = pytest.mark.django_db




def test_a_sitemap_page_linked_from_a_page_at_max_depth_is_no_orphan(owner, fast_settings):
    site = ScriptedSite()
    with site:
        listed = ("/", "/beyond", "/lonely", "/island")
        sitemap = "".join(f"<url><loc>{site.url(path)}</loc></url>" for path in listed)
        site.pages.update({
            "/robots.txt": Answer(f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n", ctype="text/plain"),
            "/sitemap.xml": Answer(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{sitemap}</urlset>',
                                   ctype="application/xml"),
            "/": page("Home", "/edge"),
            "/edge": page("At the depth limit", "/beyond", "/"),
            "/beyond": page("One click past the limit", "/"),
            "/lonely": page("Nothing links here", "/island"),
            "/island": page("Only the lonely page links here"),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, max_depth=1)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    orphans = set(Issue.objects.filter(audit=audit, code="orphan_page").values_list("url", flat=True))
    assert orphans == {site.url("/lonely"), site.url("/island")}
    # Fetched once, as a sitemap URL, and stored at its click depth.
    assert site.requests["/beyond"] == 1
    assert audit.pages.get(url=site.url("/beyond")).depth == 2

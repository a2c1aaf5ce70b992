"""Sitemap URLs robots.txt refuses: never requested, yet reported, since a sitemap
listing what crawlers may not fetch is a problem for the site's owner. Found by a
real crawl of a loopback site."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import ScriptedSite, listing
from tests.scripted_site import html_page as page

pytestmark = pytest.mark.django_db




def codes(audit: Audit, code: str) -> set[str]:
    return set(Issue.objects.filter(audit=audit, code=code).values_list("url", flat=True))


def test_sitemap_urls_robots_txt_refuses_are_reported_and_never_requested(owner, fast_settings):
    site = ScriptedSite()
    with site:
        site.pages.update({
            **listing(site, ("/", "/private/listed", "/private/linked"), rules="Disallow: /private"),
            "/": page("Home", "/private/linked"),
            "/private/listed": page("Listed, refused"),
            "/private/linked": page("Listed, linked, refused"),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert site.requests["/private/listed"] == 0
    assert site.requests["/private/linked"] == 0
    refused = {site.url("/private/listed"), site.url("/private/linked")}
    assert codes(audit, "sitemap_bad_url") == refused
    assert all("blocked by robots" in m for m in Issue.objects.filter(
        audit=audit, code="sitemap_bad_url").values_list("message", flat=True))
    # The home page links one of them: that one is no orphan, and is a refused link target as before.
    assert codes(audit, "orphan_page") == {site.url("/private/listed")}
    assert codes(audit, "blocked_by_robots") == {site.url("/private/linked")}
    assert not audit.pages.filter(url__in=refused).exists()

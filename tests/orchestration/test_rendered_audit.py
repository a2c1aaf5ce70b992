"""Rendered audits: what a browser sees, through the same frontier, writer and checks as the HTML crawl."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue, Page
from tests.factories import make_audit
from tests.render_site import RenderSite

pytestmark = [pytest.mark.django_db, pytest.mark.browser]


def audit_of(owner, site, **fields) -> Audit:
    audit = make_audit(owner, start_url=site.url(), allow_private=True, check_external=False, **fields)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def pages(audit: Audit) -> dict[str, Page]:
    return {p.url: p for p in Page.objects.filter(audit=audit, kind=Page.Kind.PAGE)}


def codes(audit: Audit, url: str) -> set[str]:
    return set(Issue.objects.filter(audit=audit, url=url).values_list("code", flat=True))


@pytest.mark.parametrize("render", ["all", "auto"])
def test_a_rendered_audit_finds_the_pages_only_javascript_links_and_says_what_it_changed(
        owner, fast_settings, render):
    with RenderSite(pages=4) as site:
        plain = audit_of(owner, site)
        rendered = audit_of(owner, site, render=render)

    # The HTML alone is a shell: one page, titled "Loading".
    assert set(pages(plain)) == {site.url()}
    assert pages(plain)[site.url()].title == "Loading"
    found = pages(rendered)
    assert set(found) == {site.url(), *(site.url(f"/app/{n}") for n in range(4))}
    home = found[site.url()]
    assert home.rendered and home.title == "Home of the rendered app"
    assert home.raw_facts["title"] == "Loading" and home.raw_facts["links"] == 0
    assert home.canonical == site.url()
    assert {"render_title_changed", "render_links_added", "render_content_added"} <= codes(rendered, site.url())
    # The depth comes from the rendered links.
    assert {found[site.url(f"/app/{n}")].depth for n in range(4)} == {1}


def test_a_plain_audit_renders_nothing_and_needs_no_browser(owner, fast_settings, settings):
    settings.SITEWARD = {**settings.SITEWARD, "CHROMIUM": "/nonexistent/chromium"}
    with RenderSite(pages=2) as site:
        audit = audit_of(owner, site)
    assert not Page.objects.filter(audit=audit, rendered=True).exists()
    assert not Issue.objects.filter(audit=audit, code__startswith="render_").exists()


def test_without_a_browser_a_rendered_audit_still_completes_and_says_each_page_failed_to_render(
        owner, fast_settings, settings):
    settings.SITEWARD = {**settings.SITEWARD, "CHROMIUM": "/nonexistent/chromium"}
    with RenderSite(pages=2) as site:
        audit = audit_of(owner, site, render="all")
    home = Page.objects.get(audit=audit, url=site.url())
    assert not home.rendered and home.title == "Loading"
    failed = Issue.objects.get(audit=audit, url=site.url(), code="render_failed")
    assert "browser could not start" in failed.message

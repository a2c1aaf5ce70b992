"""A URL that redirects is a redirect: its landing page's content is reported once, under that page's own URL."""

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue, LinkEdge, Page
from crawler.catalogue import ANSWER_CODES
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite, html_page, listing

pytestmark = pytest.mark.django_db

# What a page without a title, description or H1 is reported for.
BARE = Answer("<!doctype html><html><head></head><body><p>Nothing here to speak of.</p></body></html>")


def moved(to: str) -> Answer:
    return Answer(b"", status=301, headers={"Location": to})


def codes(audit: Audit, url: str) -> set[str]:
    return set(Issue.objects.filter(audit=audit, url=url).values_list("code", flat=True))


def test_a_redirect_carries_no_issue_of_the_page_it_lands_on_and_that_page_is_crawled_under_its_own_url(owner, fast_settings):
    with ScriptedSite() as site, ScriptedSite() as other:
        other.pages["/elsewhere"] = BARE
        site.pages.update({
            "/": html_page("Home of the redirect test site", "/a", "/b", "/c", "/e"),
            "/a": BARE,
            "/b": moved("/a"),  # to a page the home page links too
            "/c": moved("/d"),  # to a page nothing links to
            "/d": BARE,
            "/e": moved(other.url("/elsewhere")),  # to another site
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False,
                           max_pages=50, max_depth=5)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)

        content = {"title_missing", "meta_description_missing", "h1_missing"}
        assert codes(audit, site.url("/a")) >= content
        # Each landing page fetched once directly, once through its redirect.
        assert site.requests["/a"] == 2 and site.requests["/d"] == 2
        # /d, which only the redirect reaches, is a page of its own with its own issues.
        landing = Page.objects.get(audit=audit, url=site.url("/d"))
        # As many clicks away as the redirect that reaches it.
        assert (landing.kind, landing.status_code, landing.redirect_count, landing.depth) == ("page", 200, 0, 1)
        assert codes(audit, site.url("/d")) >= content
        # The redirects are judged on their answer alone: no content issue, and none from another site.
        for path in ("/b", "/c", "/e"):
            row = Page.objects.get(audit=audit, url=site.url(path))
            assert row.redirect_count == 1 and row.title == "" and not row.indexable, path
            assert codes(audit, site.url(path)) <= ANSWER_CODES, (path, codes(audit, site.url(path)))
        # External links go unchecked here, so the other site is not contacted: /e is stored as its redirect.
        assert other.requests["/elsewhere"] == 0
        # A redirect's one edge is to where it lands; it is neither a link nor a broken one.
        assert set(LinkEdge.objects.filter(audit=audit, source_url=site.url("/c")).values_list("tag", "target_url")) \
            == {("redirect", site.url("/d"))}
        assert set(LinkEdge.objects.filter(audit=audit, source_url=site.url("/e")).values_list("tag", "internal")) \
            == {("redirect", False)}
        assert Page.objects.get(audit=audit, url=site.url("/d")).inlinks == 0
        assert Page.objects.get(audit=audit, url=site.url("/c")).outlinks == 0
        assert not Issue.objects.filter(audit=audit, code__startswith="broken").exists()
        # The links to the redirects are still reported on the page that has them.
        assert set(Issue.objects.filter(audit=audit, code="redirect_internal_link").values_list("target_url", flat=True)) \
            == {site.url("/b"), site.url("/c"), site.url("/e")}


def test_a_landing_page_at_the_depth_limit_is_still_crawled(owner, fast_settings):
    with ScriptedSite() as site:
        site.pages.update({
            "/": html_page("Home of the redirect depth test site", "/docs"),
            "/docs": moved("/docs/"),  # a missing trailing slash, one click from the start
            "/docs/": BARE,
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False,
                           max_pages=50, max_depth=1)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)

        docs = Page.objects.get(audit=audit, url=site.url("/docs/"))
        assert (docs.status_code, docs.depth) == (200, 1)
        assert "title_missing" in codes(audit, site.url("/docs/"))


def test_a_landing_only_a_sitemap_listed_redirect_reaches_is_an_orphan_and_a_linked_ones_is_not(owner, fast_settings):
    with ScriptedSite() as site:
        site.pages.update({
            **listing(site, ("/", "/old", "/new", "/via", "/dest")),
            "/": html_page("Home of the redirect sitemap test site", "/via"),
            "/old": moved("/new"),  # listed, linked by nobody
            "/new": html_page("The page the old URL moved to"),
            "/via": moved("/dest"),  # listed, and linked from the home page
            "/dest": html_page("The page the linked URL moved to"),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False,
                           max_pages=50, max_depth=5)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)

        assert "orphan_page" in codes(audit, site.url("/new"))
        assert "deep_page" not in codes(audit, site.url("/new"))
        assert "orphan_page" not in codes(audit, site.url("/dest"))
        assert Page.objects.get(audit=audit, url=site.url("/dest")).depth == 1

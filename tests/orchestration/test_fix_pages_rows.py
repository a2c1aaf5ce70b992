"""What a real audit of a loopback site stores for a page over the read cap, for separate
X-Robots-Tag headers and for a canonical under <base href>, and what finalize makes of it."""

from __future__ import annotations

import pytest
from werkzeug.wrappers import Response

from audits.inline import run_audit_inline
from audits.models import Audit, Issue, Page
from crawler.fetch import FetchPolicy
from crawler.urls import url_hash
from tests.factories import make_audit
from tests.loopback import Loopback

pytestmark = pytest.mark.django_db


def html(title: str, body: str = "", head: str = "") -> bytes:
    return (f'<!doctype html><html lang="en"><head><title>{title} of the rows test site</title>{head}</head>'
            f"<body><h1>{title}</h1><p>{'words ' * 50}</p>{body}</body></html>").encode()


class Site(Loopback):
    """``routes`` maps a path to (status, body, headers as a list, so a name may repeat); anything else is a 404."""

    def __init__(self):
        self.routes: dict[str, tuple[int, bytes, list[tuple[str, str]]]] = {}
        super().__init__(self._answer)

    def _answer(self, request) -> Response:
        status, body, headers = self.routes.get(request.path, (404, html("Not found"), []))
        return Response(body, status=status, headers=headers, content_type="text/html; charset=utf-8")


def audit_of(owner, site: Site) -> Audit:
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, max_pages=50)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def issues(audit: Audit, url: str) -> set[str]:
    return set(Issue.objects.filter(audit=audit, url=url).values_list("code", flat=True))


def test_a_page_past_the_read_cap_is_stored_as_a_large_200_page_and_links_to_it_are_not_broken(
        owner, fast_settings):
    big = html("Big", "<p>x</p>" * (FetchPolicy().max_body_bytes // 8 + 1000))
    with Site() as site:
        sitemap = (f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/'
                   f'sitemap/0.9"><url><loc>{site.url("/")}</loc></url><url><loc>{site.url("/big")}</loc></url>'
                   "</urlset>").encode()
        site.routes.update({
            "/robots.txt": (200, f"User-agent: *\nAllow: /\nSitemap: {site.url('/sitemap.xml')}\n".encode(),
                            [("Content-Type", "text/plain")]),
            "/sitemap.xml": (200, sitemap, [("Content-Type", "application/xml")]),
            "/": (200, html("Home", '<a href="/big">the big page</a>'), []),
            "/big": (200, big, []),
        })
        audit = audit_of(owner, site)
        home, target = site.url("/"), site.url("/big")
    row = Page.objects.get(audit=audit, url=target)
    assert (row.status_code, row.fetch_error, row.kind) == (200, "", "page")
    assert row.indexable
    assert issues(audit, target) >= {"large_html"}
    assert not issues(audit, target) & {"fetch_failed", "sitemap_bad_url"}
    assert not Issue.objects.filter(audit=audit, target_url=target,
                                    code__in=["broken_link_internal", "redirect_broken_target"]).exists()
    assert "broken_link_internal" not in issues(audit, home)


def test_a_noindex_sent_in_its_own_x_robots_tag_header_makes_the_stored_page_not_indexable(owner, fast_settings):
    with Site() as site:
        site.routes.update({
            "/": (200, html("Home", '<a href="/hidden">hidden</a>'), []),
            "/hidden": (200, html("Hidden"), [("X-Robots-Tag", "otherbot: nofollow"), ("X-Robots-Tag", "noindex")]),
        })
        audit = audit_of(owner, site)
        target = site.url("/hidden")
    row = Page.objects.get(audit=audit, url=target)
    assert row.robots == "noindex"
    assert not row.indexable
    assert "noindex" in issues(audit, target)


def test_a_relative_canonical_is_stored_resolved_against_the_base_href(owner, fast_settings):
    with Site() as site:
        site.routes.update({
            "/": (200, html("Home", '<a href="/a/page">page</a> <a href="/a/target">a</a> '
                                    '<a href="/other/target">other</a>'), []),
            # The canonical names /other/target (through <base>); /a/target, the page's own
            # directory, answers 404.
            "/a/page": (200, html("Page", head='<base href="/other/"><link rel="canonical" href="target">'), []),
            "/other/target": (200, html("Target"), []),
        })
        audit = audit_of(owner, site)
        page, canonical = site.url("/a/page"), site.url("/other/target")
    row = Page.objects.get(audit=audit, url=page)
    assert row.canonical == canonical
    assert row.canonical_hash == url_hash(canonical)
    assert Page.objects.get(audit=audit, url=site.url("/a/target")).status_code == 404
    assert "canonical_bad_target" not in issues(audit, page)

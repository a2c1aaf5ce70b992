"""A redirect into a path robots.txt disallows is not followed: the redirect is the answer, and
where it points is recorded as blocked by robots, never requested. Real loopback sites."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue, LinkEdge, Page
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite, html_page

pytestmark = pytest.mark.django_db

ROBOTS = Answer("User-agent: *\nDisallow: /private/\n", ctype="text/plain")


def moved(to: str, status: int = 302) -> Answer:
    return Answer(b"", status=status, headers={"Location": to})


def audit_of(owner, site: ScriptedSite, **options) -> Audit:
    options = {"allow_private": True, "check_external": False, "max_pages": 20, **options}
    audit = make_audit(owner, start_url=site.url("/"), **options)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    return audit


def test_a_redirect_into_a_disallowed_path_is_stored_as_the_answer_and_its_target_as_blocked(owner, fast_settings):
    with ScriptedSite() as site:
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": html_page("Home of the robots redirect site", "/go", "/open"),
            "/go": moved("/private/x"),
            "/open": html_page("Open"),
            "/private/x": html_page("Secret"),
        })
        audit = audit_of(owner, site)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert site.requests["/private/x"] == 0
    assert site.requests["/go"] == 1 and site.requests["/open"] == 1
    go = Page.objects.get(audit=audit, url=site.url("/go"))
    assert (go.status_code, go.redirect_count, go.fetch_error) == (302, 1, "")
    assert go.final_url == site.url("/private/x")
    assert go.redirect_chain == [[site.url("/go"), 302, site.url("/private/x")]]
    # Its one edge is to where it points, which admission recorded as blocked, never as a page.
    assert set(LinkEdge.objects.filter(audit=audit, source_url=site.url("/go")).values_list("tag", "target_url")) \
        == {("redirect", site.url("/private/x"))}
    assert not Page.objects.filter(audit=audit, url=site.url("/private/x")).exists()
    blocked = Issue.objects.get(audit=audit, code="blocked_by_robots")
    assert blocked.url == site.url("/private/x")
    assert site.url("/go") in blocked.message


def test_a_redirect_chain_stops_at_the_first_disallowed_hop(owner, fast_settings):
    with ScriptedSite() as site:
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": html_page("Home of the robots chain site", "/go"),
            "/go": moved("/step", 301),
            "/step": moved("/private/x"),
            "/private/x": html_page("Secret"),
        })
        audit = audit_of(owner, site)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert site.requests["/private/x"] == 0
    go = Page.objects.get(audit=audit, url=site.url("/go"))
    assert (go.status_code, go.final_url) == (302, site.url("/private/x"))
    assert go.redirect_chain == [[site.url("/go"), 301, site.url("/step")],
                                 [site.url("/step"), 302, site.url("/private/x")]]
    assert set(Issue.objects.filter(audit=audit, code="blocked_by_robots").values_list("url", flat=True)) \
        == {site.url("/private/x")}


def test_another_origins_path_is_not_judged_by_the_audited_sites_robots_txt(owner, fast_settings):
    with ScriptedSite() as site, ScriptedSite() as other:
        other.pages["/private/x"] = html_page("Someone else's page")
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": html_page("Home of the cross-origin redirect site", "/go"),
            "/go": moved(other.url("/private/x")),
        })
        # Other sites are checked here: with external links unchecked no redirect elsewhere is followed.
        audit = audit_of(owner, site, check_external=True)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert other.requests["/private/x"] == 1  # followed as any redirect elsewhere is
    go = Page.objects.get(audit=audit, url=site.url("/go"))
    assert (go.redirect_count, go.final_url) == (1, other.url("/private/x"))
    assert not Issue.objects.filter(audit=audit, code="blocked_by_robots").exists()


def test_a_redirect_into_a_disallowed_path_is_followed_when_robots_txt_is_not_respected(owner, fast_settings):
    with ScriptedSite() as site:
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": html_page("Home of the robots-ignored redirect site", "/go"),
            "/go": moved("/private/x"),
            "/private/x": html_page("Secret"),
        })
        audit = audit_of(owner, site, respect_robots=False)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert site.requests["/private/x"] >= 1
    go = Page.objects.get(audit=audit, url=site.url("/go"))
    assert (go.redirect_count, go.final_url, go.status_code) == (1, site.url("/private/x"), 200)
    assert not Issue.objects.filter(audit=audit, code="blocked_by_robots").exists()


def test_a_start_url_redirecting_into_a_disallowed_path_fails_without_requesting_it(owner, fast_settings):
    with ScriptedSite() as site:
        site.pages.update({
            "/robots.txt": ROBOTS,
            "/": moved("/step", 301),
            "/step": moved("/private/home"),
            "/private/home": html_page("Members only"),
        })
        audit = audit_of(owner, site)
    assert (audit.status, audit.error_code) == (Audit.Status.FAILED, "start_blocked_by_robots")
    assert site.url("/private/home") in audit.error_detail
    assert site.requests["/step"] == 1
    assert site.requests["/private/home"] == 0
    assert audit.pages.count() == 0


def test_a_redirect_that_adds_a_session_id_robots_txt_disallows_is_judged_without_it(owner, fast_settings):
    """``Disallow: /*sid=`` keeps crawlers off session URLs; the crawl strips session ids, as from links, so
    the hop lands on the page they name, which robots.txt allows, and it is crawled."""
    with ScriptedSite() as site:
        site.pages.update({
            "/robots.txt": Answer("User-agent: *\nDisallow: /*sid=\n", ctype="text/plain"),
            "/": html_page("Home of the session id site", "/go"),
            "/go": moved("/shop?sid=4f9a0c2e7b1d4e6f8a3c5b2d"),
            "/shop": html_page("The shop"),
        })
        audit = audit_of(owner, site)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert set(LinkEdge.objects.filter(audit=audit, source_url=site.url("/go")).values_list("tag", "target_url")) \
        == {("redirect", site.url("/shop"))}
    assert Page.objects.filter(audit=audit, url=site.url("/shop"), status_code=200).exists()
    assert not Issue.objects.filter(audit=audit, code="blocked_by_robots").exists()

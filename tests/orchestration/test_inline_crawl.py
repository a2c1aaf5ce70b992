"""The start -> chunks -> finalize pipeline, run in-process (no cluster) against loopback sites."""

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, ChunkLease, FrontierURL, Issue, LinkEdge
from tests.crawler.fixture_site import (
    BROKEN_INTERNAL,
    DISALLOWED,
    EXPECTED_DEPTHS,
    NOINDEX,
    SITEMAP_ONLY,
    FixtureSite,
)
from tests.crawler.hostile_server import HostileServer
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def crawl_inline(audit: Audit) -> None:
    run_audit_inline(audit.pk)
    audit.refresh_from_db()


@pytest.fixture
def site():
    with FixtureSite() as fixture:
        yield fixture


def make(owner, url, **fields):
    fields.setdefault("allow_private", True)
    fields.setdefault("max_pages", 200)
    fields.setdefault("max_depth", 5)
    return make_audit(owner, start_url=url, **fields)


def test_a_fixture_site_is_crawled_end_to_end_with_true_click_depths(owner, site, fast_settings):
    audit = make(owner, site.url("/"))
    crawl_inline(audit)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    pages = {p.url.removeprefix(site.url("")): p for p in audit.pages.filter(kind="page")}
    for path, depth in EXPECTED_DEPTHS.items():
        if path.startswith("/calendar/"):
            continue
        assert path in pages, f"{path} was not stored"
        assert pages[path].depth == depth, f"{path}: depth {pages[path].depth}, expected {depth}"
    # Each stored once, and the scratch state is gone after finalize.
    assert audit.pages.count() == len({p.url_hash for p in audit.pages.all()})
    assert not FrontierURL.objects.filter(audit=audit).exists()
    assert not ChunkLease.objects.filter(audit=audit).exclude(state="done").exists()
    assert site.hits(DISALLOWED) == 0
    assert audit.pages_crawled == audit.pages.filter(kind="page").count()


def test_broken_internal_links_are_reported_with_their_source_page(owner, site, fast_settings):
    audit = make(owner, site.url("/"))
    crawl_inline(audit)
    broken = Issue.objects.filter(audit=audit, code="broken_link_internal")
    targets = {i.target_url.removeprefix(site.url("")) for i in broken}
    assert set(BROKEN_INTERNAL) <= targets
    for issue in broken:
        assert issue.page is not None and issue.page.url == issue.url
        assert LinkEdge.objects.filter(audit=audit, source_url=issue.url, target_url=issue.target_url).exists()


def test_site_level_and_cross_page_findings(owner, site, fast_settings):
    audit = make(owner, site.url("/"))
    crawl_inline(audit)
    codes = set(audit.issues.values_list("code", flat=True))
    assert {"blocked_by_robots", "redirect_internal_link", "noindex", "orphan_page", "http_4xx", "http_5xx"} <= codes
    orphan = Issue.objects.get(audit=audit, code="orphan_page", url=site.url(SITEMAP_ONLY))
    assert orphan.page.in_sitemap
    assert Issue.objects.filter(audit=audit, code="noindex", url=site.url(NOINDEX)).exists()
    blocked = Issue.objects.get(audit=audit, code="blocked_by_robots")
    assert blocked.url == site.url(DISALLOWED)
    # counters agree with the rows
    assert audit.issues_total == audit.issues.count()


def test_the_page_limit_is_respected(owner, site, fast_settings):
    audit = make(owner, site.url("/"), max_pages=5)
    crawl_inline(audit)
    assert audit.status == Audit.Status.COMPLETED
    assert audit.pages.filter(kind="page").count() == 5


def test_a_redirecting_start_url_anchors_the_crawl_on_the_final_origin(owner, site, fast_settings):
    from tests.crawler.fixture_site import START_REDIRECT

    audit = make(owner, site.elsewhere + START_REDIRECT)
    crawl_inline(audit)
    assert audit.status == Audit.Status.COMPLETED
    assert audit.origin == site.url("/").rstrip("/")
    assert audit.pages.filter(kind="page").count() > 10
    # The typed URL is a redirect like any other: its one edge is to where it lands.
    typed = site.elsewhere + START_REDIRECT
    assert list(LinkEdge.objects.filter(audit=audit, source_url=typed).values_list("tag", "target_url")) == [
        ("redirect", site.url("/"))]


def test_a_refused_start_address_fails_the_audit_with_ssrf_blocked(owner, site, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": False}
    audit = make(owner, site.url("/"), allow_private=False)
    crawl_inline(audit)
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "ssrf_blocked", "starting")
    assert site.hits("/") == 0


def test_an_unreachable_start_url_fails_with_a_code(owner, fast_settings):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    audit = make(owner, f"http://127.0.0.1:{port}/")
    crawl_inline(audit)
    assert (audit.status, audit.error_code) == ("failed", "start_url_unreachable")
    assert "refused" in audit.error_detail.lower() or "connect" in audit.error_detail.lower()


def test_a_start_page_that_always_answers_500_fails_the_audit_as_site_unavailable(owner, fast_settings, httpserver):
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    httpserver.expect_request("/").respond_with_data("<h1>down</h1>", status=500, content_type="text/html")
    audit = make(owner, httpserver.url_for("/"))
    crawl_inline(audit)
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "site_unavailable", "starting")
    assert "answered 500" in audit.error_detail
    page = audit.pages.get()
    assert page.status_code == 500  # what was fetched before it failed stays visible
    home_requests = [r for r, _ in httpserver.log if r.path == "/"]
    assert 1 < len(home_requests) <= 3  # retried, within the cap (1 + max_retries)


@pytest.mark.parametrize(("path", "said"), [
    ("/reset?declared=5000&send=100", "answered 200: "),  # the body cut short, on every try
    ("/status?code=429", "answered 429"),  # too many requests, and no Retry-After to wait for
], ids=["body-cut-short", "too-many-requests"])
def test_a_start_page_that_answers_but_never_whole_fails_the_audit_as_site_unavailable(owner, fast_settings, path,
                                                                                      said):
    """Not an audit of one page that completed: there was nothing to crawl from."""
    with HostileServer() as server:
        audit = make(owner, server.url(path))
        crawl_inline(audit)
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "site_unavailable", "starting")
    assert said in audit.error_detail
    assert audit.pages.get().url == server.url(path)  # what was fetched stays visible


def test_a_start_page_that_redirects_in_a_loop_completes_with_its_redirect_loop_issue(owner, fast_settings):
    """The site's own answer, not a door that never opened: the one page stored says what is wrong."""
    with HostileServer() as server:
        audit = make(owner, server.url("/loop"))
        crawl_inline(audit)
    assert audit.status == "completed", audit.error_detail
    assert audit.issues.filter(code="redirect_loop").exists()


def test_the_writer_gets_pages_without_their_bodies_and_stores_each_bodys_hash(owner, site, fast_settings):
    bodies = []
    audit = make(owner, site.url("/"))
    run_audit_inline(audit.pk, on_batch=lambda outcomes, issues, kinds: bodies.extend(o.result.body for o in outcomes))
    audit.refresh_from_db()

    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert bodies and set(bodies) == {None}  # a waiting batch holds facts, not pages' bytes
    parsed = audit.pages.filter(kind="page", status_code=200, content_type="text/html", redirect_count=0)
    assert parsed.exists() and not parsed.filter(body_hash="").exists()
    assert not audit.pages.filter(kind="resource").exclude(body_hash="").exists()

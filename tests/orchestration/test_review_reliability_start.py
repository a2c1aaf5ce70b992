"""RELIABILITY.md #29 at the audit level: an unreachable robots.txt means no page of the site is requested."""

import time

import pytest
from pytest_httpserver import HTTPServer

from audits.crawl.resume import run_resume
from audits.dispatch import InlineDispatcher
from audits.inline import run_audit_inline, run_steps
from tests.crawler.hostile_server import HostileServer, StubResolver, hang, ok
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


@pytest.fixture
def other():
    """A second loopback server: another origin the start URL may land on."""
    server = HTTPServer(host="127.0.0.1")
    server.start()
    yield server
    server.clear()
    server.stop()


def audit_landing_on(owner, httpserver, other):
    """An audit of ``httpserver``'s start URL, which redirects to ``other``'s home page, run to the end."""
    httpserver.expect_request("/").respond_with_data("", status=301, headers={"Location": other.url_for("/")})
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, max_pages=20)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    return audit


def requests_for(httpserver, path):
    return [r for r, _ in httpserver.log if r.path == path]


def test_a_503_robots_txt_fails_the_audit_as_robots_unreachable_before_any_page_is_requested(
        owner, fast_settings, httpserver):
    httpserver.expect_request("/robots.txt").respond_with_data(
        "<html><body><h1>503 Service Unavailable</h1></body></html>", status=503, content_type="text/html")
    httpserver.expect_request("/").respond_with_data("<a href='/a'>a</a>", content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "robots_unreachable", "starting")
    assert requests_for(httpserver, "/robots.txt")  # asked, and retried within its cap
    assert requests_for(httpserver, "/") == []  # RFC 9309 2.3.1.4: complete disallow, the start page too
    assert audit.pages.count() == 0
    # The failure is the site's issue too, with why it matters and how to fix it; no sitemap was looked for.
    assert list(audit.issues.values_list("code", "url", "message")) == [
        ("robots_txt_unavailable", httpserver.url_for("/robots.txt"),
         "robots.txt answered 503; search engines treat that as 'disallow everything'.")]


def test_an_audit_resumed_once_robots_txt_answers_again_drops_the_unavailable_issue(
        owner, fast_settings, httpserver):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "ROBOTS_RETRY_SECONDS": (0.1, 0.1)}
    httpserver.expect_request("/robots.txt").respond_with_data("busy", status=503)
    httpserver.expect_request("/").respond_with_data("<title>Home</title><p>Home.</p>", content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, check_external=False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert (audit.status, audit.issues_critical) == ("failed", 1)  # the counters count the issue shown

    httpserver.clear()  # mended: robots.txt answers again
    httpserver.expect_request("/robots.txt").respond_with_data("User-agent: *\nAllow: /\n")
    httpserver.expect_request("/").respond_with_data("<title>Home</title><p>Home.</p>", content_type="text/html")
    assert audit.reopen_for_resume()
    dispatcher = InlineDispatcher()
    run_resume(audit.pk, dispatcher)
    run_steps(dispatcher)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    assert not audit.issues.filter(code="robots_txt_unavailable").exists()


@pytest.mark.parametrize(("status", "code"), [(503, "robots_txt_unavailable"), (404, "robots_txt_missing")])
def test_an_audit_that_ignores_robots_txt_still_reports_what_is_wrong_with_it(
        owner, fast_settings, httpserver, status, code):
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, respect_robots=False)
    httpserver.expect_request("/robots.txt").respond_with_data("busy", status=status)
    httpserver.expect_request("/").respond_with_data("<title>Home</title><p>Home.</p>", content_type="text/html")
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert (audit.status, audit.pages.count()) == ("completed", 1), audit.error_detail
    robots = audit.issues.filter(url=httpserver.url_for("/robots.txt"))
    assert list(robots.values_list("code", flat=True)) == [code]
    assert f"answered {status}" in robots.get().message


def test_a_robots_txt_that_answers_503_for_a_moment_is_asked_again_and_the_audit_runs(
        owner, fast_settings, httpserver):
    # A deploy's minute of 503s, longer than one fetch's own retries: the next ask finds the
    # file, and the crawl goes on as it says.
    for _ in range(3):
        httpserver.expect_oneshot_request("/robots.txt").respond_with_data(
            "<h1>503 Service Unavailable</h1>", status=503, content_type="text/html")
    httpserver.expect_request("/robots.txt").respond_with_data("User-agent: *\nDisallow: /private\n")
    httpserver.expect_request("/").respond_with_data(
        "<a href='/a'>a</a><a href='/private/x'>p</a>", content_type="text/html")
    httpserver.expect_request("/a").respond_with_data("<p>a</p>", content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    assert len(requests_for(httpserver, "/robots.txt")) == 4
    assert requests_for(httpserver, "/a") and not requests_for(httpserver, "/private/x")


def test_a_robots_txt_still_answering_503_after_the_pauses_says_how_often_it_was_asked(
        owner, fast_settings, httpserver):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "ROBOTS_RETRY_SECONDS": (0.1, 0.1)}
    httpserver.expect_request("/robots.txt").respond_with_data("busy", status=503)
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert (audit.status, audit.error_code) == ("failed", "robots_unreachable")
    # Asked three times (each fetch retrying a 503 on its own as well), then given up on.
    assert len(requests_for(httpserver, "/robots.txt")) >= 3 and "(asked 3 times)" in audit.error_detail


def test_a_robots_txt_that_hangs_fails_the_audit_at_the_fetch_deadline_before_any_page_is_requested(
        owner, fast_settings):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "FETCH_DEADLINE": 1.5}  # the hang costs the suite this
    with HostileServer() as server:
        server.route("/robots.txt", hang)
        server.route("/", ok)
        audit = make_audit(owner, start_url=server.url("/"), allow_private=True)
        started = time.monotonic()
        run_audit_inline(audit.pk)
        took = time.monotonic() - started
        audit.refresh_from_db()
        assert (audit.status, audit.error_code) == ("failed", "robots_unreachable")
        assert server.requests["/robots.txt"] == 1  # a hang is not retried: the next try would hang as long
        assert server.requests["/"] == 0
    assert took < fast_settings.SITEWARD["FETCH_DEADLINE"] + 3


def test_a_start_url_redirecting_to_another_origin_obeys_that_origins_robots_txt(
        owner, fast_settings, httpserver, other):
    """The typed origin's robots.txt is read first; the origin the start URL lands on gets its own."""
    other.expect_request("/robots.txt").respond_with_data("User-agent: *\nDisallow: /private\n")
    other.expect_request("/").respond_with_data(
        "<a href='/private/x'>p</a><a href='/open'>o</a>", content_type="text/html")
    other.expect_request("/open").respond_with_data("<p>open</p>", content_type="text/html")
    other.expect_request("/private/x").respond_with_data("<p>secret</p>", content_type="text/html")
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    audit = audit_landing_on(owner, httpserver, other)
    assert audit.origin.rstrip("/") == other.url_for("/").rstrip("/")
    assert requests_for(other, "/robots.txt") and requests_for(other, "/open")
    assert requests_for(other, "/private/x") == []


def test_the_landing_origins_robots_txt_answering_503_for_a_moment_is_asked_again_too(
        owner, fast_settings, httpserver, other):
    for _ in range(3):  # longer than one fetch's own retries
        other.expect_oneshot_request("/robots.txt").respond_with_data("busy", status=503)
    other.expect_request("/robots.txt").respond_with_data("User-agent: *\nAllow: /\n")
    other.expect_request("/").respond_with_data("<p>home</p>", content_type="text/html")
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    audit_landing_on(owner, httpserver, other)
    assert len(requests_for(other, "/robots.txt")) == 4


@pytest.mark.parametrize("lands_on", ["/robots.txt", "/"], ids=["its-robots-txt", "its-homepage"])
def test_a_robots_txt_redirected_to_the_landing_origin_is_read_there_once(
        owner, fast_settings, httpserver, other, lands_on):
    """http -> https and apex -> www redirect robots.txt too: the file read before the start page is the landing
    origin's. Sent to its homepage instead (nginx's ``return 301 https://www.example.com;``), that page is not
    its robots.txt (it would read as "allow all"): the origin's own file is read, once, and obeyed."""
    other.expect_request("/robots.txt").respond_with_data("User-agent: *\nDisallow: /private\n")
    other.expect_request("/").respond_with_data("<a href='/private/x'>p</a>", content_type="text/html")
    other.expect_request("/private/x").respond_with_data("<p>secret</p>", content_type="text/html")
    httpserver.expect_request("/robots.txt").respond_with_data(
        "", status=301, headers={"Location": other.url_for(lands_on)})
    audit = audit_landing_on(owner, httpserver, other)
    assert len(requests_for(other, "/robots.txt")) == 1
    assert requests_for(other, "/private/x") == []
    assert "Disallow: /private" in audit.robots_body


def test_a_start_url_whose_host_does_not_resolve_fails_as_start_url_unresolvable(owner, fast_settings, monkeypatch):
    # RELIABILITY #28: NXDOMAIN is the audit-level start_url_unresolvable, said in words; no real DNS is asked.
    dns = StubResolver({})
    monkeypatch.setattr("crawler.net._system_resolver", dns)
    audit = make_audit(owner, start_url="http://no-such-host.test/", allow_private=True)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "start_url_unresolvable", "starting")
    assert audit.error_detail == "Host name could not be resolved: no-such-host.test does not exist (NXDOMAIN)"
    assert "no-such-host.test" in dns.calls and audit.pages.count() == 0

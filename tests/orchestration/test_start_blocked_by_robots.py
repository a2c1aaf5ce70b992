"""A start URL robots.txt disallows: the audit fails saying so, and the page is never requested."""

import pytest

from audits.inline import run_audit_inline
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def requests_for(httpserver, path):
    return [r for r, _ in httpserver.log if r.path == path]


def test_a_start_url_robots_txt_disallows_fails_the_audit_without_requesting_it(owner, fast_settings, httpserver):
    httpserver.expect_request("/robots.txt").respond_with_data("User-agent: *\nDisallow: /\n")
    httpserver.expect_request("/").respond_with_data("<a href='/a'>a</a>", content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "start_blocked_by_robots", "starting")
    assert "respect robots.txt" in audit.error_detail  # says how to audit a site you own anyway
    assert requests_for(httpserver, "/") == []
    assert audit.pages.count() == 0


def test_a_start_url_that_redirects_into_a_disallowed_path_fails_the_same_way(owner, fast_settings, httpserver):
    httpserver.expect_request("/robots.txt").respond_with_data("User-agent: *\nDisallow: /members/\n")
    httpserver.expect_request("/").respond_with_data("", status=302, headers={"Location": "/members/home"})
    httpserver.expect_request("/members/home").respond_with_data("<p>in</p>", content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert (audit.status, audit.error_code) == ("failed", "start_blocked_by_robots")
    assert "/members/home" in audit.error_detail
    assert requests_for(httpserver, "/members/home") == []  # the redirect into it is not followed


def test_a_disallowed_start_url_is_crawled_when_robots_txt_is_not_respected(owner, fast_settings, httpserver):
    httpserver.expect_request("/robots.txt").respond_with_data("User-agent: *\nDisallow: /\n")
    httpserver.expect_request("/").respond_with_data("<a href='/a'>a</a>", content_type="text/html")
    httpserver.expect_request("/a").respond_with_data("<p>a</p>", content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, respect_robots=False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    assert requests_for(httpserver, "/a")

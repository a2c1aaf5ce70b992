"""A long audit reads robots.txt again once its copy is ROBOTS_MAX_AGE old (RFC 9309 section 2.4: a day),
and keeps the rules it had when the file cannot be reached then."""

from datetime import timedelta

import pytest
from django.utils import timezone
from werkzeug.wrappers import Response

from audits.crawl.robots_refresh import stale
from audits.inline import run_audit_inline
from audits.models import SiteAccess
from tests.factories import make_audit
from tests.login_site import PASSWORD, USER, LoginSite

pytestmark = pytest.mark.django_db


def audited(owner, fast_settings, httpserver, later: Response):
    """A site whose robots.txt allows everything when the audit starts and answers ``later`` after."""
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "ROBOTS_MAX_AGE": 0}  # every chunk finds it stale
    asked = []

    def robots(request):
        asked.append(request.path)
        return Response("User-agent: *\nAllow: /\n", content_type="text/plain") if len(asked) == 1 else later

    httpserver.expect_request("/robots.txt").respond_with_handler(robots)
    httpserver.expect_request("/sitemap.xml").respond_with_data("", status=404)
    httpserver.expect_request("/").respond_with_data("<a href='/private'>p</a><a href='/public'>q</a>",
                                                     content_type="text/html")
    for path in ("/private", "/public"):
        httpserver.expect_request(path).respond_with_data("<title>x</title>", content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, check_external=False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    assert len(asked) >= 2  # read at the start, and again by the chunk
    return audit, [request.path for request, _ in httpserver.log]


def test_a_stale_robots_txt_is_read_again_and_its_new_rules_bind_the_rest_of_the_crawl(
        owner, fast_settings, httpserver):
    audit, requested = audited(owner, fast_settings, httpserver,
                               Response("User-agent: *\nDisallow: /private\n", content_type="text/plain"))
    assert "/private" not in requested and "/public" in requested
    assert "Disallow: /private" in audit.robots_body
    assert audit.issues.filter(code="blocked_by_robots", url__endswith="/private").exists()


def test_a_robots_txt_unreachable_when_read_again_leaves_the_rules_read_before(owner, fast_settings, httpserver):
    audit, requested = audited(owner, fast_settings, httpserver, Response("down", status=503))
    assert "/private" in requested and audit.robots_status == "ok"


def test_rules_are_stale_only_past_the_max_age_and_only_when_robots_txt_is_obeyed(owner, settings):
    audit = make_audit(owner, origin="https://shop.example")
    assert not stale(audit)  # never read yet: the start step reads it
    audit.robots_fetched_at = timezone.now() - timedelta(hours=23)
    assert not stale(audit)
    audit.robots_fetched_at = timezone.now() - timedelta(hours=25)
    assert stale(audit)
    audit.respect_robots = False
    assert not stale(audit)


class LoginRobotsSite(LoginSite):
    """robots.txt refuses /account/3/ when the audit starts; later it is behind the login, as an
    expired session would see it: a redirect to the login form, an HTML page with no rules."""

    def handle(self, request):
        if request.path == "/robots.txt":
            with self._lock:
                self.log.append((request.method, request.path, dict(request.headers)))
                first = sum(1 for _, path, _ in self.log if path == "/robots.txt") == 1
            if first:
                return Response("User-agent: *\nDisallow: /account/3/\n", content_type="text/plain")
            return Response("", status=302, headers={"Location": "/login/?next=/robots.txt"})
        return super().handle(request)


def test_a_robots_txt_sent_to_the_login_page_when_read_again_leaves_the_rules_read_before(owner, fast_settings):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "ROBOTS_MAX_AGE": 0}
    with LoginRobotsSite(pages=6) as site:
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=30, max_depth=3)
        access = SiteAccess.objects.filter(site=audit.site).first() or SiteAccess(site=audit.site)
        access.set_login(site.url("/login/"), {"username": USER}, {"password": PASSWORD}, r"Members")
        access.save()
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        asked = [path for _, path, _ in site.log]
    assert asked.count("/robots.txt") >= 2  # read again, and sent to the login page
    assert "Disallow: /account/3/" in audit.robots_body and "/account/2/" in asked

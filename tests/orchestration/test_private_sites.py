"""Audits of private sites on loopback: basic auth, extra headers, a form login with its session.

Credentials go to the audit's own origin only (an "external" loopback host logs
every request it gets), logout links are never followed, an expired session is
renewed once, and a failed login ends the audit as login_failed.
"""

from __future__ import annotations

import pytest
from werkzeug.wrappers import Response

from audits.inline import run_audit_inline
from audits.models import Audit, Page, SiteAccess
from tests.factories import make_audit
from tests.login_site import PASSWORD, USER, LoginSite, RequestLog, page

pytestmark = pytest.mark.django_db


def audit_of(owner, site: LoginSite, configure, **fields) -> Audit:
    fields = {"max_pages": 50, "max_depth": 3, "check_external": True, **fields}
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, **fields)
    access = SiteAccess(site=audit.site)
    configure(access)
    access.save()
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    return audit


def crawled(audit: Audit, site: LoginSite) -> set[str]:
    return set(Page.objects.filter(audit=audit, kind=Page.Kind.PAGE, status_code=200)
               .values_list("url", flat=True))


def form_login(site: LoginSite, password: str = PASSWORD):
    def configure(access: SiteAccess) -> None:
        access.set_login(site.url("/login/"), {"username": USER}, {"password": password}, r"Members")
    return configure


def test_a_site_behind_basic_auth_is_crawled_and_its_password_never_reaches_another_host(owner, fast_settings):
    with RequestLog() as elsewhere, LoginSite(mode="basic", external=None) as site:
        site.external = elsewhere.url("/linked")
        audit = audit_of(owner, site, lambda access: access.set_basic(USER, PASSWORD))
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)
        assert elsewhere.log, "the external link was checked"
        assert all("Authorization" not in headers for headers in elsewhere.log)


def test_extra_headers_go_with_every_request_to_the_site_and_to_no_other_host(owner, fast_settings):
    with RequestLog() as elsewhere, LoginSite(mode="basic") as site:
        site.external = elsewhere.url("/linked")
        token = "Basic " + __import__("base64").b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        audit = audit_of(owner, site, lambda access: access.set_headers([f"Authorization: {token}",
                                                                         "X-Staging: yes"]))
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert all(headers.get("X-Staging") == "yes" for _, _, headers in site.log)
        assert elsewhere.log and all("X-Staging" not in headers for headers in elsewhere.log)


def test_a_form_login_crawls_the_members_area_without_ever_following_logout(owner, fast_settings):
    with RequestLog() as elsewhere, LoginSite() as site:
        site.external = elsewhere.url("/linked")
        audit = audit_of(owner, site, form_login(site))
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)
        assert site.logins == 1
        assert not [path for _, path, _ in site.log if path.startswith("/logout")]
        assert elsewhere.log and all("Cookie" not in headers for headers in elsewhere.log)


def test_a_session_that_expires_mid_crawl_is_renewed_once_and_the_crawl_completes(owner, fast_settings):
    with LoginSite(pages=8, session_uses=8) as site:
        audit = audit_of(owner, site, form_login(site), max_pages=20, concurrency=1)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert site.logins == 2
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)


def test_a_session_that_keeps_expiring_fails_the_audit_as_login_failed_keeping_the_pages(owner, fast_settings):
    with LoginSite(pages=12, session_uses=2) as site:
        audit = audit_of(owner, site, form_login(site), concurrency=1)
        assert (audit.status, audit.error_code) == ("failed", "login_failed")
        assert "again" in audit.error_detail
        assert crawled(audit, site)  # what was crawled before is kept


def test_a_wrong_password_fails_the_audit_as_login_failed_and_says_why(owner, fast_settings):
    with LoginSite() as site:
        audit = audit_of(owner, site, form_login(site, password="not-it"))
        assert (audit.status, audit.error_code) == ("failed", "login_failed")
        assert "success pattern" in audit.error_detail
        assert "not-it" not in audit.error_detail


class EscapedCookieSite(LoginSite):
    """Its login page also sets a cookie the stdlib unquotes into a line break, and one beyond Latin-1."""

    def _login(self, request):
        response = super()._login(request)
        if request.method == "GET":
            response.headers.add("Set-Cookie", 'pref="a\\012b"; Path=/')
            response.headers.add("Set-Cookie", 'lang="\u0151"; Path=/'.encode().decode("latin-1"))
        return response


def test_a_cookie_the_site_sets_that_cannot_be_sent_back_is_dropped_and_the_crawl_goes_on(owner, fast_settings):
    secret = "team-TOPSECRET-42"

    def configure(access: SiteAccess) -> None:
        access.set_headers([f"Cookie: team={secret}"])
        form_login(site)(access)

    with EscapedCookieSite() as site:
        audit = audit_of(owner, site, configure)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert secret not in audit.error_detail
        assert all(headers.get("Cookie", "").startswith(f"team={secret}") for _, path, headers in site.log
                   if path.startswith("/account/"))


class CanonicalHostSite(LoginSite):
    """Its start URL, on localhost, redirects to 127.0.0.1 as an apex redirects to www."""

    def handle(self, request):
        if request.host.startswith("localhost"):
            return Response("", status=301, headers={"Location": self.url(request.full_path.rstrip("?"))})
        return super().handle(request)


def test_a_start_url_that_redirects_to_another_origin_fails_saying_which_origin_to_audit(owner, fast_settings):
    with CanonicalHostSite(mode="basic") as site:
        audit = make_audit(owner, start_url=site.url("/").replace("127.0.0.1", "localhost"), allow_private=True)
        access = SiteAccess(site=audit.site)
        access.set_basic(USER, PASSWORD)
        access.save()
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert (audit.status, audit.error_code) == ("failed", "login_failed")
        assert f"audit {site.base}/" in audit.error_detail
        assert not Page.objects.filter(audit=audit, status_code=401).exists()


def test_a_login_left_on_the_old_origin_after_the_site_moved_is_refused_and_its_cookies_go_nowhere(
        owner, fast_settings):
    with LoginSite() as old, RequestLog() as new:
        site = make_audit(owner, start_url=old.url("/"), allow_private=True).site
        access = SiteAccess(site=site)
        access.set_login(old.url("/login/"), {"username": USER}, {"password": PASSWORD}, r"Members")
        access.save()
        site.start_url = new.url("/")  # changed after the access was saved
        site.save()
        audit = make_audit(owner, site=site, start_url=site.start_url, allow_private=True, max_pages=5)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert (audit.status, audit.error_code) == ("failed", "login_failed")
        assert "The login page must be on" in audit.error_detail
        assert old.logins == 0 and not [h for h in new.log if "Cookie" in h]


class ResourceLogoutSite(LoginSite):
    """Its pages link a logout URL as an <iframe> (front-channel logout) and as an <img>."""

    def _page(self, path):
        if path in ("/", *self.paths()):
            body = page(f"Members {path}", self.paths()).replace(
                "</body>", '<iframe src="/logout/"></iframe><img src="/logout/pixel.gif" alt="x"></body>')
            return Response(body, content_type="text/html")
        return Response("not here", status=404, content_type="text/html")


def test_a_logout_url_linked_as_a_resource_is_never_requested(owner, fast_settings):
    with ResourceLogoutSite() as site:
        audit = audit_of(owner, site, form_login(site))
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert not [path for _, path, _ in site.log if path.startswith("/logout")]
        assert site.logins == 1


class ExitRedirectSite(LoginSite):
    """Its pages link /account/exit, which the logout pattern does not name, and which redirects to /logout/."""

    def handle(self, request):
        if request.path == "/account/exit":
            with self._lock:
                self.log.append((request.method, request.path, dict(request.headers)))
            return Response("", status=302, headers={"Location": "/logout/"})
        return super().handle(request)


def test_a_redirect_to_the_logout_url_is_not_followed_and_the_session_lives_on(owner, fast_settings):
    with ExitRedirectSite() as site:
        site.external = site.url("/account/exit")  # the one more link every page has
        audit = audit_of(owner, site, form_login(site))
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert not [path for _, path, _ in site.log if path.startswith("/logout")]
        assert site.logins == 1
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)
        # The redirect is what the URL answered, and says where it points.
        exit_row = Page.objects.get(audit=audit, url=site.url("/account/exit"))
        assert (exit_row.status_code, exit_row.redirect_count, exit_row.fetch_error) == (302, 1, "")
        assert exit_row.final_url == site.url("/logout/")
        assert exit_row.redirect_chain == [[site.url("/account/exit"), 302, site.url("/logout/")]]

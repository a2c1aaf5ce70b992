"""A private site's logout is never requested, however it is spelt or wherever it is named; its lookalikes are."""

from __future__ import annotations

import pytest
from werkzeug.wrappers import Request, Response

from audits.inline import run_audit_inline
from audits.models import Audit, Page, SiteAccess
from tests.factories import make_audit
from tests.login_site import PASSWORD, USER, LoginSite

pytestmark = pytest.mark.django_db


class SpeltSite(LoginSite):
    """Members' pages also link /go/, which redirects to the logout spelt ``/log%6Fut/`` (the server reads
    /logout/), and /blog-outreach/, an ordinary page; robots.txt names the logout as a sitemap."""

    def paths(self) -> list[str]:
        return [*super().paths(), "/go/", "/blog-outreach/"]

    def handle(self, request: Request) -> Response:
        if request.path == "/robots.txt":
            with self._lock:
                self.log.append((request.method, request.path, dict(request.headers)))
            return Response(f"User-agent: *\nAllow: /\nSitemap: {self.url('/logout/')}\n", content_type="text/plain")
        if request.path == "/go/":
            with self._lock:
                self.log.append((request.method, request.path, dict(request.headers)))
            return Response("", status=302, headers={"Location": "/log%6Fut/"})
        return super().handle(request)


def crawled_logged_in(owner, site: SpeltSite, **fields) -> tuple[Audit, list[str]]:
    """An audit of ``site`` behind its login, run in-process; the paths the site was asked for."""
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=30, max_depth=3,
                       concurrency=1, **fields)
    access = SiteAccess(site=audit.site)
    access.set_login(site.url("/login/"), {"username": USER}, {"password": PASSWORD}, r"Members")
    access.save()
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    return audit, [path for _, path, _ in site.log]


def test_a_logout_spelt_otherwise_or_named_as_a_sitemap_is_never_requested_and_lookalikes_are_crawled(
        owner, fast_settings):
    with SpeltSite(pages=3) as site:
        audit, asked = crawled_logged_in(owner, site)
        logins = site.logins
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert "/logout/" not in asked
    assert logins == 1
    assert Page.objects.get(audit=audit, url=site.url("/blog-outreach/")).status_code == 200
    assert Page.objects.filter(audit=audit, url=site.url("/go/")).exists()  # the redirect itself, not followed


def test_a_private_site_whose_audit_has_as_many_exclude_patterns_as_the_form_allows_still_skips_its_logout(
        owner, fast_settings):
    # The form accepts 50 exclude patterns; the crawl adds the site's logout pattern to them.
    exclude = "\n".join(rf"/never-{n}/" for n in range(50))
    with SpeltSite(pages=3) as site:
        audit, asked = crawled_logged_in(owner, site, exclude_patterns=exclude)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert "/logout/" not in asked
    assert Page.objects.get(audit=audit, url=site.url("/blog-outreach/")).status_code == 200


class CamelCaseLogoutSite(LoginSite):
    """Every members' page links its camelCase logout, ``/doLogout?r=<the page>``, which ends the session."""

    def _page(self, path: str) -> Response:
        response = super()._page(path)
        if response.status_code == 200:
            response.set_data(response.get_data().replace(b"</body>", f'<a href="/doLogout?r={path}">Log out</a></body>'.encode()))
        return response

    def handle(self, request: Request) -> Response:
        if request.path == "/doLogout":
            with self._lock:
                self.log.append((request.method, request.full_path, dict(request.headers)))
                self.sessions.pop(request.cookies.get("sessionid"), None)
            return Response("", status=302, headers={"Location": "/login/"})
        return super().handle(request)


def test_a_camel_case_logout_link_is_never_requested_by_the_default_pattern(owner, fast_settings):
    with CamelCaseLogoutSite(pages=3) as site:
        audit, asked = crawled_logged_in(owner, site)
        logins = site.logins
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert not [path for path in asked if path.startswith("/doLogout")]
    assert logins == 1
    assert Page.objects.filter(audit=audit, url=site.url("/account/2/"), status_code=200).exists()

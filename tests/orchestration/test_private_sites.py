"""Audits of private sites on loopback: basic auth, extra headers, a form login with its session.

Credentials go to the audit's own origin only (an "external" loopback host logs
every request it gets), logout links are never followed, an expired session is
renewed once, and a failed login ends the audit as login_failed.
"""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Page, SiteAccess
from tests.factories import make_audit
from tests.login_site import PASSWORD, USER, LoginSite, RequestLog

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

"""A private site on plain http whose login page and members' pages set Secure cookies: the crawl
takes none of them, as a browser would not, so none goes back in cleartext."""

from __future__ import annotations

import pytest

from audits.models import Page
from tests.login_site import LoginSite
from tests.orchestration.login_audit import audit_behind_login

pytestmark = pytest.mark.django_db


class SecureCookieSite(LoginSite):
    """Its login page sets ``s=1; Secure`` and a ``__Host-`` cookie; every members' page a Secure one."""

    def _login(self, request):
        response = super()._login(request)
        if request.method == "GET":
            response.headers.add("Set-Cookie", "s=1; Secure; Path=/")
            response.headers.add("Set-Cookie", "__Host-h=1; Secure; Path=/")
        return response

    def _page(self, path):
        response = super()._page(path)
        response.headers.add("Set-Cookie", "p=1; Secure; HttpOnly")
        response.headers.add("Set-Cookie", "__Secure-q=1; Secure")
        return response


def test_secure_cookies_a_plain_http_site_sets_are_never_sent_back(owner, fast_settings):
    with SecureCookieSite(pages=6) as site:
        audit = audit_behind_login(owner, site, max_pages=20, max_depth=10)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert Page.objects.filter(audit=audit, status_code=200).count() >= len(site.paths())
        sent = set().union(*(names(headers.get("Cookie", "")) for _, _, headers in site.log))
        assert "sessionid" in sent
        assert not sent & {"s", "__Host-h", "p", "__Secure-q"}


def names(cookie_header: str) -> set[str]:
    return {part.partition("=")[0].strip() for part in cookie_header.split(";") if part.strip()}

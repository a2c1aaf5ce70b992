"""A private site that renews its session ticket only on a redirect (``/account/1 -> /account/1/``)
and refuses the old ticket from then on: the crawl keeps the renewed one and stays logged in."""

from __future__ import annotations

import pytest
from werkzeug.wrappers import Response

from audits.models import Page
from tests.login_site import LoginSite, page
from tests.orchestration.login_audit import audit_behind_login

pytestmark = pytest.mark.django_db


class RedirectRenewalSite(LoginSite):
    """Its members' pages are linked without their trailing slash; the redirect adding it answers with a
    new session ticket and ends the old one, as a site rotating its session id on every request does."""

    def handle(self, request):
        if request.path.startswith("/account/") and not request.path.endswith("/"):
            with self._lock:
                self.log.append((request.method, request.path, dict(request.headers)))
                live = self.sessions.pop(request.cookies.get("sessionid"), None) is not None
            if not live:
                return Response("", status=302, headers={"Location": f"/login/?next={request.path}"})
            response = Response("", status=302, headers={"Location": f"{request.path}/"})
            response.set_cookie("sessionid", self._new_session(), httponly=True)
            return response
        return super().handle(request)

    def _page(self, path):
        if path in ("/", *self.paths()):
            links = [p.rstrip("/") for p in self.paths()]
            return Response(page(f"Members {path}", links), content_type="text/html")
        return super()._page(path)


def test_a_session_ticket_renewed_only_on_a_redirect_keeps_the_crawl_logged_in(owner, fast_settings):
    with RedirectRenewalSite(pages=8) as site:
        audit = audit_behind_login(owner, site, max_pages=30, max_depth=10)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert site.logins == 1  # every page was reached with the ticket its redirect renewed
        members = set(Page.objects.filter(audit=audit, status_code=200).values_list("url", flat=True))
        assert {site.url(p) for p in site.paths()} <= members
        assert not [path for _, path, _ in site.log if path.startswith("/login/?next=")]

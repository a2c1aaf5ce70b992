"""Cookies a private site's own pages set during the crawl: a sliding session's renewed ticket
keeps the crawl logged in, across chunks, and a page deleting the session is not followed."""

from __future__ import annotations

import pytest
from werkzeug.wrappers import Response

from audits.crawl.session import (
    claim_login,
    record_start_login,
    session_state,
    store_login,
    store_refreshed,
    stored_session,
)
from audits.models import Audit, ChunkLease, Page
from crawler.login import Session
from tests.factories import make_audit
from tests.login_site import LoginSite, page
from tests.orchestration.login_audit import audit_behind_login

pytestmark = pytest.mark.django_db


def audit_of(owner, site: LoginSite, **fields) -> Audit:
    return audit_behind_login(owner, site, **fields)


def crawled(audit: Audit, site: LoginSite) -> set[str]:
    return set(Page.objects.filter(audit=audit, kind=Page.Kind.PAGE, status_code=200).values_list("url", flat=True))


class ChainSite(LoginSite):
    """Each page links to the next only: every page is a click deeper, so each takes a chunk of its own."""

    def _page(self, path: str) -> Response:
        if path not in ("/", *self.paths()):
            return super()._page(path)
        number = int(path.strip("/").split("/")[-1]) + 1 if path != "/" else 0
        return Response(page(f"Members {path}", self.paths()[number:number + 1]), content_type="text/html")


def test_a_sliding_session_renewed_by_the_pages_lasts_a_crawl_many_times_its_length(owner, fast_settings):
    # Each ticket opens three pages; 24 pages outlast it eight times over.
    with LoginSite(pages=24, session_uses=3, sliding=True) as site:
        audit = audit_of(owner, site)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)
        assert site.logins == 1


def test_a_sliding_session_renewed_in_one_chunk_goes_on_in_the_next(owner, fast_settings):
    with ChainSite(pages=8, session_uses=3, sliding=True) as site:
        audit = audit_of(owner, site, max_depth=20)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)
        assert ChunkLease.objects.filter(audit=audit, url_count__gt=0).count() >= 8
        assert site.logins == 1


def test_a_sliding_session_holds_with_four_requests_in_flight(owner, fast_settings):
    with LoginSite(pages=30, session_uses=8, sliding=True) as site:
        audit = audit_of(owner, site, concurrency=4, max_pages=60)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)
        assert site.logins == 1


class ForgetfulPageSite(LoginSite):
    """One page tells the browser to drop the session cookie, though the session lives on at the server."""

    def _page(self, path: str) -> Response:
        response = super()._page(path)
        if path == self.paths()[1]:
            response.delete_cookie("sessionid")
        return response


def test_a_page_deleting_the_session_cookie_does_not_end_the_crawl_session(owner, fast_settings):
    with ForgetfulPageSite(pages=8) as site:
        audit = audit_of(owner, site)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)
        assert site.logins == 1


def test_renewed_cookies_wait_while_another_chunk_logs_in_again(owner):
    # A claimed renewal stores no cookies until its login does: the chunks waiting on it must not
    # take a page's renewed ticket of the expired session for the new login's.
    audit = make_audit(owner)
    record_start_login(audit, Session({"sessionid": "first"}, "/"))
    assert claim_login(audit, session_state(audit)[1])
    store_refreshed(audit, {"sessionid": "renewed-by-a-page"})
    assert session_state(audit)[0] == {} and session_state(audit)[2], "still waiting for the login"
    store_login(audit, Session({"sessionid": "new-login"}, "/"))
    store_refreshed(audit, {"sessionid": "renewed-after"})
    assert session_state(audit)[0] == {"sessionid": "renewed-after"}


class AnonymousSessionSite(LoginSite):
    """One members' page sends every member to the login page, whose every visit opens a new anonymous
    session (PHP's session_start does), and every page renews the ticket."""

    def handle(self, request):
        if request.path == "/staff-only/" and request.cookies.get("sessionid") in self.sessions:
            self.log.append((request.method, request.path, dict(request.headers)))
            return Response("", status=302, headers={"Location": "/login/?next=/staff-only/"})
        return super().handle(request)

    def _page(self, path: str) -> Response:
        if path in ("/", *self.paths()):
            return Response(page(f"Members {path}", [*self.paths(), "/staff-only/"]), content_type="text/html")
        return super()._page(path)

    def _login(self, request):
        response = super()._login(request)
        if request.method == "GET":
            response.set_cookie("sessionid", "anonymous")
        return response


class LinkedLoginSite(AnonymousSessionSite):
    """Every members' page links the login page itself too (a "switch account" link), not only by a redirect."""

    def _page(self, path: str) -> Response:
        if path in ("/", *self.paths()):
            return Response(page(f"Members {path}", ["/login/", *self.paths()]), content_type="text/html")
        return super()._page(path)


@pytest.mark.parametrize("site_class", [AnonymousSessionSite, LinkedLoginSite])
def test_the_login_pages_anonymous_session_never_replaces_the_members_session(owner, fast_settings, site_class):
    """Reached by a redirect (a staff-only page) or by a plain link, the login page is crawled, not believed."""
    with site_class(pages=12, session_uses=40, sliding=True) as site:
        audit = audit_of(owner, site, concurrency=2)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert {site.url(p) for p in site.paths()} <= crawled(audit, site)
        assert site.logins == 1
        assert any(path.startswith("/login/") for method, path, _ in site.log if method == "GET")
        member_requests = [headers.get("Cookie", "") for _, path, headers in site.log if path.startswith("/account/")]
        assert member_requests and not any("sessionid=anonymous" in cookie for cookie in member_requests)


def test_cookies_renewed_on_an_expired_session_never_undo_another_chunks_login(owner):
    # Chunk B still holds the first login's session when chunk A logs in again; a page then renews a cookie
    # of B's (a load balancer's sticky cookie): stored, it would hand every next chunk the expired session.
    audit = make_audit(owner)
    record_start_login(audit, Session({"sessionid": "first"}, "/"))
    held_by_b = stored_session(audit)
    assert held_by_b == ({"sessionid": "first"}, 1)
    assert claim_login(audit, session_state(audit)[1])
    store_login(audit, Session({"sessionid": "second"}, "/"))
    assert not store_refreshed(audit, {"sessionid": "first", "AWSALB": "renewed"}, held_by_b[1])
    assert session_state(audit)[0] == {"sessionid": "second"}
    # Chunks of the same login store over each other: each one's renewed ticket is good.
    assert store_refreshed(audit, {"sessionid": "second-a"}, 2)
    assert store_refreshed(audit, {"sessionid": "second-b"}, 2)
    assert stored_session(audit) == ({"sessionid": "second-b"}, 2)

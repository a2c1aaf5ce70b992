"""A private site's session across an audit's life: resumed runs log in afresh, and a page the
account may not see is not taken for an expired session."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from werkzeug.wrappers import Response

from audits.crawl import session, start
from audits.crawl.bridge import run_with_db_here
from audits.crawl.resume import run_resume
from audits.crawl.session import SessionKeeper
from audits.crawl.setup import crawl_setup
from audits.crawl.start import run_start
from audits.dispatch import InlineDispatcher
from audits.inline import run_audit_inline, run_steps
from audits.models import Audit, Page, SiteAccess
from audits.models.site_access import AuditSession
from crawler.fetch import Fetcher
from tests.factories import make_audit
from tests.login_site import PASSWORD, USER, LoginSite, page

pytestmark = pytest.mark.django_db


def set_login(audit: Audit, site: LoginSite) -> None:
    access = SiteAccess.objects.filter(site=audit.site).first() or SiteAccess(site=audit.site)
    access.set_login(site.url("/login/"), {"username": USER}, {"password": PASSWORD}, r"Members")
    access.save()


def audit_of(owner, site: LoginSite, **fields) -> Audit:
    fields = {"max_pages": 30, "max_depth": 3, "concurrency": 1, **fields}
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, **fields)
    set_login(audit, site)
    return audit


def resume(audit: Audit) -> None:
    assert audit.reopen_for_resume()
    dispatcher = InlineDispatcher()
    run_resume(audit.pk, dispatcher)
    run_steps(dispatcher)
    audit.refresh_from_db()


def test_an_audit_that_failed_for_an_expiring_session_logs_in_again_when_resumed(owner, fast_settings):
    with LoginSite(pages=12, session_uses=2) as site:
        audit = audit_of(owner, site)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert (audit.status, audit.error_code) == ("failed", "login_failed")
        logins_before = site.logins
        site.session_uses = None  # the site was fixed: sessions last
        resume(audit)
        assert site.logins > logins_before
        assert audit.status == "completed", (audit.error_code, audit.error_detail)


def test_a_resumed_audit_whose_session_was_sealed_under_an_old_key_logs_in_again(owner, fast_settings):
    fast_settings.SITEWARD_FIELD_KEY = "key-one"
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SIZE": 3}
    with LoginSite(pages=12) as site:
        audit = audit_of(owner, site)
        run_start(audit.pk, InlineDispatcher())  # logged in; the crawl stops before any chunk
        audit.refresh_from_db()
        assert audit.cancel()
        fast_settings.SITEWARD_FIELD_KEY = "key-two"  # the key rotated ...
        set_login(audit, site)                        # ... and the person set the login again
        resume(audit)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert site.logins == 2
        assert {site.url(p) for p in site.paths()} <= set(
            Page.objects.filter(audit=audit, status_code=200).values_list("url", flat=True))


def test_session_cookies_sealed_under_an_old_key_are_no_session_and_the_crawl_logs_in_again(
        owner, fast_settings):
    fast_settings.SITEWARD_FIELD_KEY = "key-one"
    with LoginSite(pages=12) as site:
        audit = audit_of(owner, site)
        dispatcher = InlineDispatcher()
        run_start(audit.pk, dispatcher)
        fast_settings.SITEWARD_FIELD_KEY = "key-two"  # rotated while the crawl was queued
        set_login(audit, site)
        run_steps(dispatcher)
        audit.refresh_from_db()
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert site.logins == 2


class StaffOnlyPageSite(LoginSite):
    """One members' page sends every member to the login page, as Django's permission_required does."""

    def handle(self, request):
        if request.path == "/staff-only/" and request.cookies.get("sessionid") in self.sessions:
            self.log.append((request.method, request.path, dict(request.headers)))
            return Response("", status=302, headers={"Location": "/login/?next=/staff-only/"})
        return super().handle(request)

    def _page(self, path):
        if path in ("/", *self.paths()):
            return Response(page(f"Members {path}", [*self.paths(), "/staff-only/"]), content_type="text/html")
        return Response("not here", status=404, content_type="text/html")


def test_a_page_the_member_may_not_see_is_kept_and_the_audit_goes_on_logged_in(owner, fast_settings):
    with StaffOnlyPageSite(pages=6) as site:
        audit = audit_of(owner, site, concurrency=2)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert site.logins == 1  # the session held: no login spent on that page
        staff = Page.objects.get(audit=audit, url=site.url("/staff-only/"))
        assert "/login/" in staff.final_url
        # Where it sends the member is the login page, not a page of the site to crawl.
        assert not Page.objects.filter(audit=audit, url__contains="/login/").exists()
        assert {site.url(p) for p in site.paths()} <= set(
            Page.objects.filter(audit=audit, status_code=200).values_list("url", flat=True))


class PublicHomeSite(LoginSite):
    """Its start page opens to anyone, greeting a member as a member and anyone else as a guest."""

    def handle(self, request):
        with self._lock:
            member = request.cookies.get("sessionid") in self.sessions
        if request.path == "/" and not member:
            return Response(page("Welcome guest", [*self.paths(), "/logout/"]), content_type="text/html")
        return super().handle(request)


def test_an_expired_session_is_renewed_even_when_the_start_page_is_public(owner, fast_settings):
    # A start page that opens logged out proves nothing about the session: only
    # the login's success pattern on it does, and a guest's home page lacks it.
    # Seven pages a session: the start step's requests (the login's check, the start page, the sitemap and
    # the soft-404 probe) and three account pages, then the renewal's check and the other five.
    with PublicHomeSite(pages=8, session_uses=7) as site:
        audit = audit_of(owner, site)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert site.logins == 2
        members = set(Page.objects.filter(audit=audit, status_code=200).values_list("url", flat=True))
        assert {site.url(p) for p in site.paths()} <= members


class DashboardSite(StaffOnlyPageSite):
    """The login ends on a dashboard, the one page saying so; the start page greets everyone the same."""

    def handle(self, request):
        if request.path == "/" and request.method == "GET":
            return Response(page("Welcome to the site", [*self.paths(), "/staff-only/"]), content_type="text/html")
        return super().handle(request)

    def _login(self, request):
        response = super()._login(request)
        if response.status_code == 302:
            response.headers["Location"] = "/dashboard/"
        return response

    def _page(self, path):
        if path == "/dashboard/":
            return Response(page("Your dashboard", self.paths()), content_type="text/html")
        return super()._page(path)


def test_a_page_the_member_may_not_see_is_told_from_an_expiry_by_the_page_the_login_ended_on(owner, fast_settings):
    """The success pattern was written for the page after logging in: a start page that never shows
    it must not make a permission redirect look like an expired session, nor end the audit."""
    with DashboardSite(pages=6) as site:
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=30, concurrency=2)
        access = SiteAccess(site=audit.site)
        access.set_login(site.url("/login/"), {"username": USER}, {"password": PASSWORD}, r"Your dashboard")
        access.save()
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert site.logins == 1
    assert {site.url(p) for p in site.paths()} <= set(
        Page.objects.filter(audit=audit, status_code=200).values_list("url", flat=True))
    assert "/login/" in Page.objects.get(audit=audit, url=site.url("/staff-only/")).final_url


def two_chunks_after_an_expiry(owner, site: LoginSite, crawl, before=None):
    """Two chunks side by side (PostgreSQL runs several an audit), each with its own keeper, once the
    start's session has expired on the server: ``await crawl(fetch_one, fetch_other)``, each taking a path.
    ``before(audit)`` runs first."""
    audit = audit_of(owner, site)
    run_start(audit.pk, InlineDispatcher())  # the first login
    audit.refresh_from_db()
    setup = crawl_setup(audit)
    site.sessions.clear()
    if before is not None:
        before(audit)

    async def chunks(db):
        async with (Fetcher(setup.policy, setup.guard, credentials=setup.credentials) as one,
                    Fetcher(setup.policy, setup.guard, credentials=setup.credentials) as other):
            def fetching(keeper: SessionKeeper, fetcher: Fetcher):
                async def fetched(path):
                    return SimpleNamespace(url=site.url(path), result=await fetcher.fetch(site.url(path)))
                return lambda path: keeper.fetch(lambda: fetched(path))

            return await crawl(
                fetching(SessionKeeper(audit, setup.login, one, db, session_login=setup.session_login), one),
                fetching(SessionKeeper(audit, setup.login, other, db, session_login=setup.session_login), other))

    return audit, run_with_db_here(chunks)


def test_a_chunk_whose_session_another_chunk_renewed_takes_the_new_session_and_spends_no_login(
        owner, fast_settings):
    async def one_then_other(first, second):
        renewed = await first("/account/1/")
        # The other chunk still sends the expired cookies: it takes the renewed session.
        taken = await second("/account/2/")
        return renewed.result, taken.result

    with LoginSite(pages=6) as site:
        _, (renewed, taken) = two_chunks_after_an_expiry(owner, site, one_then_other)
    assert (renewed.status, taken.status) == (200, 200)
    assert site.logins == 2  # the start's and one renewal, for both chunks


def test_two_chunks_meeting_one_expiry_at_once_log_in_again_once_and_share_the_session(owner, fast_settings):
    # Side by side, both read the same login count before either had logged in again: a site
    # with one session per account would end the first one's session with the second login.
    async def at_once(first, second):
        return await asyncio.gather(first("/account/1/"), second("/account/2/"))

    with LoginSite(pages=6) as site:
        audit, outcomes = two_chunks_after_an_expiry(owner, site, at_once)
    assert [outcome.result.status for outcome in outcomes] == [200, 200]
    assert site.logins == 2  # the start's and one renewal, for both chunks
    assert AuditSession.objects.get(audit=audit).logins == 2


def test_a_renewal_claimed_by_a_chunk_that_died_logging_in_is_made_by_the_next_chunk(
        owner, fast_settings, monkeypatch):
    monkeypatch.setattr(session, "LOGIN_WAIT", 0.5)

    async def one(first, _):
        return await first("/account/1/")

    def died_claiming(audit):
        # The chunk claimed the renewal (its cookies emptied, the count taken) and was killed logging in.
        AuditSession.objects.filter(audit=audit).update(logins=2, cookies="")

    with LoginSite(pages=6) as site:
        audit, outcome = two_chunks_after_an_expiry(owner, site, one, before=died_claiming)
    assert outcome.result.status == 200
    assert site.logins == 2  # the start's, and this chunk's in place of the dead one's
    assert session.session_state(audit)[0]  # its cookies stored for the others


def test_a_start_run_again_after_its_worker_died_spends_one_login_not_two(owner, fast_settings, monkeypatch):
    """The crawl keeps its one login to renew an expired session with."""
    class WorkerDied(Exception):
        pass

    stored = start.record_start_login

    def store_then_die(audit, cookies):
        stored(audit, cookies)
        raise WorkerDied  # after the login was stored, before the start was done

    with LoginSite() as site:
        audit = audit_of(owner, site)
        monkeypatch.setattr(start, "record_start_login", store_then_die)
        with pytest.raises(WorkerDied):
            run_start(audit.pk, InlineDispatcher())
        monkeypatch.setattr(start, "record_start_login", stored)
        run_start(audit.pk, InlineDispatcher())
        logins = site.logins
    assert logins == 2
    assert AuditSession.objects.get(audit=audit).logins == 1

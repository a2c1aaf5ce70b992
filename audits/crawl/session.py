"""A private site's session for one audit: credentials for every chunk, one login, one renewal.

The start step logs in (when the site has a login form) and stores the session
cookies sealed on ``AuditSession``; every chunk, on any worker, builds its
``Credentials`` from them. A chunk whose page lands on the login page, while the
start page (or the page the login ended on) no longer shows the login's success pattern, renews
the session once for the whole audit; a
second expiry, or a login that fails, ends the audit as ``login_failed`` with
what was crawled kept. The login page and the cookies stay on the audit's origin.

A cookie the site's own pages set or renew on the way (a sliding session's new
ticket) joins the session, as in a browser (``Credentials.renewed_by``), and is
stored for the audit's other chunks.
"""

from __future__ import annotations

import asyncio
import json
import time

from crawler.charset import decode_text
from crawler.credentials import Credentials, LoginForm, login_page_problem
from crawler.hop_cookies import answers
from crawler.login import LoginFailed, Session, is_login_page, is_login_redirect, log_in
from crawler.urls import InvalidURL, compile_patterns, origin_of

from ..models import Audit
from ..models.site_access import AuditSession, SiteAccess
from ..secrets import SecretUnreadable, seal, unseal

# Logins an audit may make: the one at start and one renewal after an expiry.
MAX_LOGINS = 2
# How long a chunk waits for the cookies of a login another chunk is making, and how often it looks:
# a login walks at most MAX_HOPS redirects, each within the fetch's own deadline.
LOGIN_WAIT = 120.0
LOGIN_POLL = 0.25
# A chunk stores the cookies its pages renewed at most this often (and when it ends): a site
# that sets a new cookie on every page costs no write a page, and the other chunks still get
# a sliding session's ticket long before the one they hold runs out.
REFRESH_STORE_SECONDS = 5.0


class SessionLost(Exception):
    """The audit cannot go on logged in; the message is for the audit page."""


def site_access(audit: Audit) -> SiteAccess | None:
    access = SiteAccess.objects.filter(site_id=audit.site_id).first()
    return access if access is not None and access.is_set else None


def stored_session(audit: Audit) -> tuple[dict[str, str], int]:
    """The session's stored cookies, and the login they came of: the audit's login count when they were read."""
    cookies, logins, _ = session_state(audit)
    return cookies, logins


def moved_problem(start_url: str, crawled: str) -> str | None:
    """Why a site's access cannot go with a crawl of ``crawled`` (an origin): the start URL redirects there.

    The access is bound to the start URL's origin, so a crawl anchored elsewhere
    (apex -> www, even http -> https) would send nothing and read every page as
    a 401 or a login page; the person audits the origin the site lives on.
    """
    try:
        if not crawled or origin_of(start_url) == crawled:
            return None
    except InvalidURL:
        return None
    return (f"The start URL redirects to {crawled}, where this site's access is never sent: "
            f"audit {crawled}/ and set its access there.")


def credentials_for(audit: Audit, access: SiteAccess | None) -> tuple[Credentials | None, int]:
    """What the audit's requests to its own origin carry: the site's access and the session's cookies;
    and the login those came of (``stored_session``)."""
    if access is None:
        return None, 0
    if problem := moved_problem(audit.start_url, audit.origin):
        raise SessionLost(problem)
    cookies, login = stored_session(audit)
    try:
        return access.credentials(audit.start_url, cookies=cookies), login
    except SecretUnreadable as exc:
        raise SessionLost(f"{exc} (site access)") from None


def login_form(audit: Audit, access: SiteAccess | None) -> LoginForm | None:
    """The site's login, checked again now: its page must be on the audit's origin.

    The access screen checks this when it is saved, but the site's start URL
    may have changed since; the password and the session's cookies never leave
    the origin the audit crawls.
    """
    try:
        login = access.login_form() if access is not None else None
    except SecretUnreadable as exc:
        raise SessionLost(f"{exc} (login password)") from None
    if login is not None and (problem := login_page_problem(login.url, audit.start_url)):
        raise SessionLost(f"{problem} The saved login page is {login.url}: set the login again.")
    return login


def record_start_login(audit: Audit, session: Session) -> None:
    """Store the start step's login as the audit's first, however often the start ran (a worker killed in
    it is run again): a crawl then still has its one login to renew an expired session with."""
    AuditSession.objects.update_or_create(audit=audit, defaults={
        "cookies": seal(json.dumps(session.cookies)), "landing": seal(session.landing), "logins": 1})


def claim_login(audit: Audit, after: int) -> bool:
    """Take the audit's next login before making it, so one chunk logs in again for an expiry and
    the others wait for its cookies; False when another chunk took it first, or none is left.

    ``after``: the login count the caller read (a conditional UPDATE decides).
    """
    if after >= MAX_LOGINS:
        return False
    row, _ = AuditSession.objects.get_or_create(audit=audit)
    # No cookies until the login stores its own: that is what tells the others to wait.
    return AuditSession.objects.filter(pk=row.pk, logins=after).update(logins=after + 1, cookies="") == 1


def store_login(audit: Audit, session: Session) -> int:
    """The session of the login this chunk claimed, for the audit's other chunks; the login count it is of."""
    AuditSession.objects.filter(audit=audit).update(cookies=seal(json.dumps(session.cookies)),
                                                    landing=seal(session.landing))
    return AuditSession.objects.filter(audit=audit).values_list("logins", flat=True).first() or 0


def login_landing(audit: Audit) -> str:
    """Where the audit's last login ended; "" when unknown or sealed under a key changed since."""
    sealed = AuditSession.objects.filter(audit=audit).values_list("landing", flat=True).first()
    try:
        return unseal(sealed) if sealed else ""
    except SecretUnreadable:
        return ""


def store_refreshed(audit: Audit, cookies: dict[str, str], login: int | None = None) -> bool:
    """Cookies the crawled pages renewed, for the audit's other chunks; whether they were stored.

    Never while a renewal is claimed (no cookies stored yet): the chunks waiting on it would
    take these for its login's. With ``login`` (the login the caller's cookies came of), only
    while that is still the audit's session: a chunk beside it may have logged in again since,
    and cookies of the expired session (a load balancer's renewed sticky cookie on it) must not
    undo that login. Chunks of one login overwrite each other: each one's renewed ticket is good.
    """
    sealed = seal(json.dumps(cookies))
    stored = AuditSession.objects.filter(audit=audit).exclude(cookies="")
    if login is not None:
        stored = stored.filter(logins=login)
    if stored.update(cookies=sealed):
        return True
    return AuditSession.objects.get_or_create(audit=audit, defaults={"cookies": sealed})[1]


def session_state(audit: Audit) -> tuple[dict[str, str], int, bool]:
    """The session's stored cookies, the logins the audit has made, and whether a chunk is logging in
    again now (it claimed a login and has stored no cookies yet)."""
    row = AuditSession.objects.filter(audit=audit).first()
    if row is None:
        return {}, 0, False
    try:
        cookies = json.loads(unseal(row.cookies)) if row.cookies else {}
    except SecretUnreadable:
        cookies = {}  # sealed under a key changed since: no session, the first page meeting the login logs in again
    return cookies, row.logins, row.logins > 0 and not row.cookies


def renewed_by_answer(credentials: Credentials | None, result, skip=None) -> Credentials | None:
    """``credentials`` with the cookies a fetch's answers set, its redirects' first (``Credentials.renewed_by``),
    those a browser takes (``hop_cookies.answers``); none from an answer whose URL ``skip`` names."""
    if credentials is None:
        return credentials
    for url, lines in answers(result):
        if skip is None or not skip(str(url)):
            credentials = credentials.renewed_by(url, lines)
    return credentials


def start_login(credentials: Credentials | None) -> Credentials | None:
    """What a login is made with: the person's headers, not the expired session's cookies."""
    return credentials.without_session() if credentials is not None else None


def logged_in(credentials: Credentials | None, login: LoginForm, cookies: dict[str, str]) -> Credentials:
    """The crawl's credentials carrying a login's cookies, which belong to the login page's origin only."""
    session = Credentials.for_site(login.url, cookies=cookies)
    if credentials is None:
        return session
    if credentials.origin != session.origin:
        raise SessionLost(f"The login page {login.url} is not on the audited site; its cookies are not sent there.")
    return credentials.with_cookies(cookies)


async def open_session(fetcher, login: LoginForm) -> Session:
    """Log in through ``fetcher``; SessionLost says why not, in words (never a secret)."""
    try:
        return await log_in(fetcher, login)
    except LoginFailed as exc:
        raise SessionLost(str(exc)) from None


class SessionKeeper:
    """A chunk's hold on the audit's login session.

    A fetch sent to the login page may mean the session expired, or only that
    the account may not see that URL (Django's permission_required answers so).
    The start page tells them apart:

    1. The first task to see it (others in the chunk wait on the lock, then
       retry with the new cookies) fetches the start page: if it still shows the login's
       success pattern, the session holds, the URL is kept as it answered (a
       redirect to the login page) and no login is spent on it.
    2. Otherwise it takes the session another chunk stored since, or logs in
       again (the audit's login count checked and stored through ``db``), and
       the URL is fetched once more.
    3. A URL that still meets the login page is checked the same way: the
       session holds (the URL is kept) or it is gone, and SessionLost ends the
       audit as ``login_failed``, as a login that fails or a session that keeps
       expiring does.
    """

    def __init__(self, audit: Audit, login: LoginForm | None, fetcher, db, followers=(), session_login: int = 0):
        """``followers``: other fetchers of the chunk (the browser's) that carry the session too;
        ``session_login``: the login the fetcher's cookies came of (``stored_session``)."""
        self.audit, self.login, self.fetcher, self.db = audit, login, fetcher, db
        self.followers = tuple(followers)
        self._lock = asyncio.Lock()
        self._renewals = 0  # sessions this chunk took after an expiry; renewed cookies are not one
        self._stored = self._session()  # the session as the audit's row holds it, as far as this chunk knows
        self._login = session_login  # the login it came of
        self._stored_at = time.monotonic()

    async def fetch(self, make):
        """``await make()`` (a page or resource outcome), again after a renewal if it met the login page."""
        renewals = self._renewals
        outcome = await make()
        if self.login is None or not is_login_redirect(outcome.result, self.login.url):
            if self._renewals == renewals:  # else it was sent with the expired session: its cookies are that one's
                await self._take_cookies(outcome.result)
            return outcome
        async with self._lock:
            if self._renewals == renewals:  # nobody renewed it meanwhile
                if await self._session_holds():
                    return outcome
                await self._renew()
        outcome = await make()
        if is_login_redirect(outcome.result, self.login.url) and not await self._session_holds():
            raise SessionLost(f"{outcome.url} still sends the crawler to the login page after logging in again.")
        await self._take_cookies(outcome.result)
        return outcome

    async def store(self) -> None:
        """Store the cookies the site renewed since the last store, for the audit's next chunks."""
        session = self._session()
        if session != self._stored and not self._lock.locked():
            self._stored_at = time.monotonic()
            if await self.db(store_refreshed, self.audit, session, self._login):
                self._stored = session

    async def _take_cookies(self, result) -> None:
        """The cookies a fetch's answers set, its redirects' too (``renewed_by_answer``): the chunk's
        requests and its browser carry them on, and they are stored now and then. Not while a
        renewal is made, whose login walks with cookies of its own; nor from the login page, whose
        cookies (a new anonymous session) belong to no one logged in."""
        credentials = self.fetcher.credentials
        if self._lock.locked():
            return
        # A linked login page, crawled as a page, is the login page all the same.
        skip = (lambda url: is_login_page(url, self.login.url)) if self.login is not None else None
        renewed = renewed_by_answer(credentials, result, skip)
        if renewed is not credentials:
            self._set(renewed)
            if time.monotonic() - self._stored_at >= REFRESH_STORE_SECONDS:
                await self.store()

    def _session(self) -> dict[str, str]:
        return dict(self.fetcher.credentials.session) if self.fetcher.credentials is not None else {}

    async def _session_holds(self) -> bool:
        """Whether the start page, or else the page the last login ended on, fetched with the session,
        shows the login's success pattern.

        Only that proves the session still on: a public start page opens logged
        out too, and taking that for a live session left an expired one unrenewed.
        The pattern was written for the page after logging in (a dashboard), which a
        public start page need not show. Without a pattern nothing proves it, and the
        page counts as an expiry.
        """
        if not self.login.success.strip():
            return False
        pattern = compile_patterns([self.login.success])[0]
        landing = await self.db(login_landing, self.audit)
        for url in dict.fromkeys(filter(None, (self.audit.start_url, landing))):
            result = await self.fetcher.fetch(url)
            if result.error is None and not is_login_redirect(result, self.login.url) \
                    and pattern.search(decode_text(result.body or b"", result.charset)):
                return True
        return False

    async def _renew(self) -> None:
        """A new session: another chunk's, when it renewed since this one read the session; else a login."""
        sent = dict(self.fetcher.credentials.session) if self.fetcher.credentials is not None else {}
        stored, logins, renewing = await self.db(session_state, self.audit)
        if stored and stored != sent:
            # Chunks side by side: another one logged in again already, or its pages renewed the
            # cookies. Those of a renewal may have run out by now too; then a login it is.
            self._use(stored, logins)
            if not self.login.success.strip() or await self._session_holds():
                return
            sent = stored
        if renewing:
            self._use(*await self._cookies_of_other_login(sent))  # and another is logging in now
            return
        if logins >= MAX_LOGINS:
            raise SessionLost("The session expired again after the crawler had logged in again; "
                              "the site may end sessions early or log out on some page.")
        if await self.db(claim_login, self.audit, logins):
            self._use(*await self._log_in())
            return
        self._use(*await self._cookies_of_other_login(sent))  # one session for the audit

    async def _log_in(self) -> tuple[dict[str, str], int]:
        self.fetcher.credentials = start_login(self.fetcher.credentials)
        session = await open_session(self.fetcher, self.login)
        return session.cookies, await self.db(store_login, self.audit, session)

    async def _cookies_of_other_login(self, sent: dict[str, str]) -> tuple[dict[str, str], int]:
        """The cookies another chunk's login stores, once it has (it claimed the login first).

        A claim still open after LOGIN_WAIT is a chunk that died logging in: its login is made here.
        """
        for _ in range(int(LOGIN_WAIT / LOGIN_POLL)):
            stored, logins, renewing = await self.db(session_state, self.audit)
            if stored and stored != sent:
                return stored, logins
            if not renewing or not await self.db(self.audit.running_now):
                raise SessionLost("The session expired again after the crawler had logged in again.")
            await asyncio.sleep(LOGIN_POLL)
        return await self._log_in()

    def _use(self, cookies: dict[str, str], login: int) -> None:
        """Crawl on with a renewed session: the cookies of login number ``login``, as stored."""
        self._renewals += 1
        self._stored, self._login = cookies, login
        self._set(logged_in(start_login(self.fetcher.credentials), self.login, cookies))

    def _set(self, credentials: Credentials) -> None:
        self.fetcher.credentials = credentials
        for follower in self.followers:
            follower.credentials = credentials

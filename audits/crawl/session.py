"""A private site's session for one audit: credentials for every chunk, one login, one renewal.

The start step logs in (when the site has a login form) and stores the session
cookies sealed on ``AuditSession``; every chunk, on any worker, builds its
``Credentials`` from them. A chunk whose page lands on the login page renews the
session once for the whole audit; a second expiry, or a login that fails, ends
the audit as ``login_failed`` with what was crawled kept.
"""

from __future__ import annotations

import asyncio
import json

from crawler.credentials import Credentials, LoginForm
from crawler.login import LoginFailed, is_login_redirect, log_in

from ..models import Audit
from ..models.site_access import AuditSession, SiteAccess
from ..secrets import SecretUnreadable, seal, unseal

# Logins an audit may make: the one at start and one renewal after an expiry.
MAX_LOGINS = 2


class SessionLost(Exception):
    """The audit cannot go on logged in; the message is for the audit page."""


def site_access(audit: Audit) -> SiteAccess | None:
    access = SiteAccess.objects.filter(site_id=audit.site_id).first()
    return access if access is not None and access.is_set else None


def _cookies(audit: Audit) -> dict[str, str]:
    row = AuditSession.objects.filter(audit=audit).first()
    return json.loads(unseal(row.cookies)) if row and row.cookies else {}


def credentials_for(audit: Audit, access: SiteAccess | None) -> Credentials | None:
    """What the audit's requests to its own origin carry: the site's access and the session's cookies."""
    if access is None:
        return None
    try:
        return access.credentials(audit.start_url, cookies=_cookies(audit))
    except SecretUnreadable as exc:
        raise SessionLost(f"{exc} (site access)") from None


def login_form(access: SiteAccess | None) -> LoginForm | None:
    try:
        return access.login_form() if access is not None else None
    except SecretUnreadable as exc:
        raise SessionLost(f"{exc} (login password)") from None


def record_login(audit: Audit, cookies: dict[str, str]) -> bool:
    """Store a login's cookies; False when the audit has used its logins (the session keeps expiring)."""
    row, _ = AuditSession.objects.get_or_create(audit=audit)
    if row.logins >= MAX_LOGINS:
        return False
    row.cookies, row.logins = seal(json.dumps(cookies)), row.logins + 1
    row.save(update_fields=["cookies", "logins"])
    return True


def logins_left(audit: Audit) -> int:
    row = AuditSession.objects.filter(audit=audit).first()
    return MAX_LOGINS - (row.logins if row else 0)


def start_login(credentials: Credentials | None) -> Credentials | None:
    """What a login is made with: the person's headers, not the expired session's cookies."""
    return credentials.without_session() if credentials is not None else None


def logged_in(credentials: Credentials | None, start_url: str, cookies: dict[str, str]) -> Credentials:
    return credentials.with_cookies(cookies) if credentials else Credentials.for_site(start_url, cookies=cookies)


async def open_session(fetcher, login: LoginForm) -> dict[str, str]:
    """Log in through ``fetcher``; SessionLost says why not, in words (never a secret)."""
    try:
        return await log_in(fetcher, login)
    except LoginFailed as exc:
        raise SessionLost(str(exc)) from None


class SessionKeeper:
    """A chunk's hold on the audit's login session.

    A fetch sent to the login page means the session expired: the first task to
    see it logs in again (others wait on the lock, then retry with the new
    cookies), the audit's login count is checked and stored through ``db``, and
    the URL is fetched once more. A session that keeps expiring, or a login
    that fails, raises SessionLost and the audit fails as ``login_failed``.
    """

    def __init__(self, audit: Audit, login: LoginForm | None, fetcher, db):
        self.audit, self.login, self.fetcher, self.db = audit, login, fetcher, db
        self._lock = asyncio.Lock()

    async def fetch(self, make):
        """``await make()`` (a page or resource outcome), again after a renewal if it met the login page."""
        sent_with = self.fetcher.credentials
        outcome = await make()
        if self.login is None or not is_login_redirect(outcome.result, self.login.url):
            return outcome
        async with self._lock:
            if self.fetcher.credentials is sent_with:  # nobody renewed it meanwhile
                await self._renew()
        outcome = await make()
        if is_login_redirect(outcome.result, self.login.url):
            raise SessionLost(f"{outcome.url} still sends the crawler to the login page after logging in again.")
        return outcome

    async def _renew(self) -> None:
        if await self.db(logins_left, self.audit) <= 0:
            raise SessionLost("The session expired again after the crawler had logged in again; "
                              "the site may end sessions early or log out on some page.")
        self.fetcher.credentials = start_login(self.fetcher.credentials)
        cookies = await open_session(self.fetcher, self.login)
        if not await self.db(record_login, self.audit, cookies):
            raise SessionLost("The session expired again after the crawler had logged in again.")
        self.fetcher.credentials = logged_in(self.fetcher.credentials, self.audit.start_url, cookies)

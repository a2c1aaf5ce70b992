"""Logging in through a site's form once, at the start of a crawl, for its session cookies.

The login page is fetched (its cookies kept, a CSRF cookie among them), its
form filled (``credentials.form_to_submit``) and sent as a browser would; every hop's Set-Cookie is
kept while redirects are walked, and the page the login ends on must match the
site's success pattern. Every step stays on the site's own origin: a login that
redirects elsewhere has failed, and nothing of it is sent there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urljoin

import httpx

from .charset import decode_text
from .cookies import read_cookies
from .credentials import Credentials, LoginForm, form_to_submit
from .request_url import origin
from .types import FetchResult
from .urls import compile_patterns

MAX_HOPS = 10


@dataclass(frozen=True)
class Session:
    """A login's cookies, and the page it redirected to, which showed the success pattern ("" for none)."""

    cookies: dict[str, str]
    landing: str


class LoginFailed(Exception):
    """The login did not work; the message says at which step, in words for the audit page."""


async def _walk(fetcher, method: str, url: str, jar: dict[str, str], home, base: Credentials | None, *,
                form: bytes | None = None, referer: str | None = None) -> FetchResult:
    """``method`` ``url`` and its redirects (as GET, as browsers do after a form), cookies kept on the way.

    The jar rides in the fetcher's credentials, so it joins a person's own
    Cookie header as one header and, like it, goes to the site's origin only.
    """
    for _ in range(MAX_HOPS + 1):
        try:
            there = origin(httpx.URL(url))
        except httpx.InvalidURL:
            raise LoginFailed(f"The login was sent to {_shown(url)[:200]}, which is no valid address.") from None
        if there != home:
            raise LoginFailed(f"The login left the site for {_shown(url)}; nothing was sent there.")
        fetcher.credentials = base.with_cookies(jar) if base else Credentials.for_site(url, cookies=jar)
        headers = [(b"Referer", referer.encode())] if referer else []
        result = await fetcher.send(method, url, headers=headers, form=form)
        if result.error is not None:
            raise LoginFailed(f"{method} {_shown(url)} failed: {result.error_detail or result.error}")
        read_cookies(jar, result.set_cookies, secure=there[0] == "https")  # the answer came from ``url``
        location = result.headers.get("location") if result.status in (301, 302, 303, 307, 308) else None
        if not location:
            return result
        keep_post = result.status in (307, 308) and method == "POST"
        method, form = ("POST", form) if keep_post else ("GET", None)
        try:
            url = urljoin(url, location.strip())
        except ValueError:  # a Location such as http://[::1 that no URL parser reads
            raise LoginFailed(f"The login redirected to {location.strip()[:200]}, which is no valid address.") from None
    raise LoginFailed(f"The login redirected more than {MAX_HOPS} times.")


async def log_in(fetcher, login: LoginForm) -> Session:
    """Log in with ``login`` through ``fetcher``; the session, or LoginFailed saying why."""
    base = fetcher.credentials
    try:
        return await _log_in(fetcher, login, base)
    finally:
        fetcher.credentials = base  # the caller decides what the crawl carries next


async def _log_in(fetcher, login: LoginForm, base: Credentials | None) -> Session:
    home = origin(httpx.URL(login.url))
    if base is not None and base.origin != home:
        # The password would go to a page the site's other credentials may not reach.
        raise LoginFailed(f"The login page {login.url} is not on the audited site's origin; nothing was sent to it.")
    jar: dict[str, str] = {}
    page = await _walk(fetcher, "GET", login.url, jar, home, base)
    if page.status is None or page.status >= 400:
        raise LoginFailed(f"The login page {login.url} answered {page.status}.")
    try:
        sent = form_to_submit(page.body or b"", page.final_url or login.url, dict(login.fields))
    except ValueError as exc:
        raise LoginFailed(str(exc)) from None
    form = urlencode(sent.data).encode() if sent.method == "POST" else None
    done = await _walk(fetcher, sent.method, sent.url, jar, home, base, form=form, referer=page.final_url or login.url)
    text = decode_text(done.body or b"", done.charset)
    success = compile_patterns([login.success])[0] if login.success.strip() else None
    if done.status is None or done.status >= 400 or (success is not None and not success.search(text)):
        how = "" if sent.method == "POST" else " The form has no method=\"post\", so it was sent as a GET, as a browser would."
        raise LoginFailed(f"The page after logging in ({_shown(done.final_url)}, status {done.status}) "
                          f"does not match the success pattern: check the user name, password and pattern.{how}")
    if not jar:
        raise LoginFailed("The login set no cookie, so there is no session to crawl with.")
    # Only a page the login redirected to: the form's own target, fetched again, would log in again
    # (a GET form's carries the password in its query).
    landing = done.final_url if done.final_url and done.final_url != sent.url else ""
    return Session(jar, landing)


def is_login_redirect(result: FetchResult, login_url: str) -> bool:
    """Whether a fetch was sent to the login page: the session has expired.

    A login page addressed by its query (``index.php?route=account/login``) is
    only that page when the landing URL has those parameters too; its own extra
    ones (``next=``) do not matter, nor does a trailing slash (``/accounts/login``
    set, ``/accounts/login/?next=/a`` sent), nor the return address the login URL
    was saved with (``/login?next=/dashboard`` set, ``/login?next=/x`` sent).
    """
    if not result.redirects or not result.final_url:
        return False
    return is_login_page(result.final_url, login_url)


# Query parameters that say where to go after logging in (Django's next, WordPress's redirect_to,
# ASP.NET's ReturnUrl, Drupal's destination, CAS's service...), lower-cased without "-" or "_".
RETURN_PARAMETERS = frozenset({
    "next", "return", "returnto", "returnurl", "returnpath", "redirect", "redirectto", "redirecturl",
    "redirecturi", "camefrom", "continue", "destination", "goto", "back", "backurl", "backto", "referer",
    "referrer", "from", "target", "service", "successurl", "forward", "url",
})


def is_login_page(url: str, login_url: str) -> bool:
    """Whether ``url`` is the login page, with whatever parameters of its own (``next=``) (see ``is_login_redirect``)."""
    want, landed = httpx.URL(login_url), httpx.URL(url)
    if origin(landed) != origin(want) or landed.path.rstrip("/") != want.path.rstrip("/"):
        return False
    params = set(parse_qsl(landed.query.decode(), keep_blank_values=True))
    return all(pair in params for pair in parse_qsl(want.query.decode(), keep_blank_values=True)
               if not _return_address(*pair))


def _return_address(name: str, value: str) -> bool:
    """Whether a parameter of the saved login URL only says where to go after logging in.

    A login URL copied from the address bar carries the page that sent there
    (``?next=/dashboard``), and every expiry sends with another one: such a parameter
    does not name the page, while ``route=account/login`` does. A parameter is a return
    address by its usual name, or by its value being a path or an absolute URL.
    """
    return (name.lower().replace("-", "").replace("_", "") in RETURN_PARAMETERS
            or value.startswith("/") or re.match(r"(?i)https?://", value) is not None)


def _shown(url: str | None) -> str:
    """``url`` for a message, without its query: a form sent as a GET carries the password there."""
    return (url or "").split("#", 1)[0].split("?", 1)[0]

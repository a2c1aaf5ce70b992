"""What a private site needs on its requests, and the one origin they may go to.

Basic auth, extra headers and a login's cookies travel together as a
``Credentials`` bound to the audit's origin. The fetcher asks ``for_url`` at
every hop, so an external link, a resource on another host or a redirect that
leaves the origin never carries them: RFC 9110 leaves credentials to the
protection space they were meant for, and a browser strips them the same way.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urldefrag, urlencode, urljoin, urlsplit, urlunsplit

import httpx
from lxml import etree
from lxml import html as lxml_html

from .cookies import read_cookies
from .request_url import origin
from .urls import InvalidURL, holds_userinfo, origin_of

# Followed, a logout link ends the session the crawl runs on: URLs matching this
# (case-insensitive, on the whole URL) are never requested when a site has a login.
# The word must start the URL or follow a non-alphanumeric, so /blog-outreach/ is crawled, or start
# a camelCase word after a small letter (/doLogout, /userSignOut), which /blogOutreach does not;
# "log off" (ASP.NET's /Account/LogOff) must also end there, or go on in capitals (LogOffUser), so
# /log-offset/ is crawled too.
LOGOUT_DEFAULT = r"(?i)((^|[^a-z0-9])(log|sign)|(?-i:[a-z]L)og|(?-i:[a-z]S)ign)[-_]?(out|off((?-i:[^a-z])|$))"

# A header name is an RFC 9110 token; these are the fetcher's to set, or would
# change how the message is framed, so a site's extra headers may not set them.
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_RESERVED = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
    "proxy-connection", "accept-encoding",
})
MAX_HEADERS = 20
MAX_HEADER_BYTES = 8192


def parse_header(line: str) -> tuple[str, str]:
    """``"Name: value"`` as (name, value); ValueError says what is wrong with it."""
    name, sep, value = line.partition(":")
    name, value = name.strip(), value.strip()
    # The messages never quote the line: one without a colon, or with a bad
    # name, is most likely the secret itself, and they reach CI logs and forms.
    if not sep:
        raise ValueError("A header is written 'Name: value'; no ':' found.")
    if not name:
        raise ValueError("A header is written 'Name: value'; nothing before the ':'.")
    if not _TOKEN.match(name):
        raise ValueError("The text before ':' is not a valid header name.")
    if name.lower() in _RESERVED:
        raise ValueError(f"The {name} header is set by the crawler and cannot be replaced.")
    # The crawler reaches the site through no proxy, so a proxy's credentials would go to the audited site itself.
    if name.lower() == "proxy-authorization":
        raise ValueError(f"The {name} header is for a proxy, and the crawler uses none: it would go to the site.")
    if any(ch < " " and ch != "\t" or ch == "\x7f" for ch in value):
        raise ValueError(f"The value of {name} may not contain line breaks or other control characters.")
    if len(name) + len(value) > MAX_HEADER_BYTES:
        raise ValueError(f"The value of {name} is longer than {MAX_HEADER_BYTES} characters.")
    return name, value


def headers_problem(lines: Sequence[str], *, basic: bool = False) -> str | None:
    """Why these extra header lines cannot be sent, or None: too many, one malformed, or an
    Authorization header beside basic auth (``basic``), which would send two."""
    if len(lines) > MAX_HEADERS:
        return f"At most {MAX_HEADERS} extra headers."
    for line in lines:
        try:
            name, _ = parse_header(line)
        except ValueError as exc:
            return str(exc)
        if basic and name.lower() == "authorization":
            return "Use either basic auth or an Authorization header, not both."
    return None


def basic_header(user: str, password: str) -> str:
    """The Authorization value of HTTP basic auth (RFC 7617) for ``user`` and ``password``."""
    if ":" in user:
        raise ValueError("A basic-auth user name may not contain ':'.")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


@dataclass(frozen=True, slots=True)
class Credentials:
    """Headers for requests to one origin only (scheme, host, port).

    ``base`` is what the person set (basic auth, extra headers); ``session`` a
    login's cookies, replaced whole by the next login. A person's Cookie header
    and the session's cookies go out as one Cookie header.
    """

    origin: tuple[str, str, int | None]
    base: tuple[tuple[bytes, bytes], ...] = ()
    session: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[bytes, bytes], ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        jar: dict[str, str] = {}
        kept = []
        for name, value in self.base:
            if name.lower() == b"cookie":
                for part in value.decode("latin-1").split(";"):
                    key, _, val = part.strip().partition("=")
                    if key:
                        jar[key] = val
            else:
                kept.append((name, value))
        jar.update(self.session)
        if jar:
            kept.append((b"Cookie", "; ".join(f"{k}={v}" for k, v in jar.items()).encode("latin-1")))
        object.__setattr__(self, "headers", tuple(kept))

    @classmethod
    def for_site(cls, start_url: str, *, basic: tuple[str, str] | None = None,
                 headers: Iterable[str] = (), cookies: Mapping[str, str] | None = None) -> Credentials | None:
        """What ``start_url``'s origin gets: None when there is nothing to send."""
        pairs = [parse_header(line) for line in headers]
        if len(pairs) > MAX_HEADERS:
            raise ValueError(f"At most {MAX_HEADERS} extra headers.")
        if basic is not None:
            pairs.append(("Authorization", basic_header(*basic)))
        creds = cls(origin(httpx.URL(start_url)), tuple((n.encode(), v.encode()) for n, v in pairs),
                    tuple((cookies or {}).items()))
        return creds if creds.headers else None

    def for_url(self, url: httpx.URL) -> list[tuple[bytes, bytes]]:
        """The headers a request to ``url`` carries: all of them at home, none anywhere else."""
        return list(self.headers) if self.headers and origin(url) == self.origin else []

    def with_cookies(self, cookies: Mapping[str, str]) -> Credentials:
        """These credentials with ``cookies`` as the session (a new login's, replacing the last one's)."""
        return replace(self, session=tuple(cookies.items()))

    def renewed_by(self, url: httpx.URL, set_cookies: Sequence[str]) -> Credentials:
        """These credentials with the cookies a response from ``url`` set: new names and new values
        join the session when ``url`` is on the origin; anything else leaves them as they are.

        A cookie the site deletes (a past Expires, an empty value) is still sent:
        the session it belongs to may well live on at the server, and losing it
        would cost a login, while a dead one only leads to the login page, which
        the crawl checks for anyway.
        """
        if not set_cookies or origin(url) != self.origin:
            return self
        jar = dict(self.session)
        read_cookies(jar, tuple(set_cookies), deletions=False, secure=url.scheme == "https")
        return self if jar == dict(self.session) else self.with_cookies(jar)

    def without_session(self) -> Credentials:
        """What the person set, without a login's cookies: what a new login starts from."""
        return replace(self, session=())


def login_page_problem(login_url: str, start_url: str) -> str | None:
    """Why ``login_url`` cannot be the login page of a crawl of ``start_url``, or None: it must be on its origin,
    and hold no user or password (the address is stored and shown as it is; secrets are sealed)."""
    try:
        if holds_userinfo(login_url):
            return ("The login page's address holds a user name or password: give the address alone, "
                    "and put a password in the basic auth or login fields, which are stored encrypted.")
        if origin_of(login_url) == origin_of(start_url):
            return None
    except (InvalidURL, ValueError):  # holds_userinfo's ValueError: an unclosed IPv6 bracket
        pass
    return f"The login page must be on {origin_of(start_url)}: credentials never leave the site."


@dataclass(frozen=True, slots=True)
class LoginForm:
    """A login: the page holding the form, the fields to fill, and what proves it worked."""

    url: str
    fields: tuple[tuple[str, str], ...]
    success: str  # a regex; the page after the post must match it


@dataclass(frozen=True, slots=True)
class Submission:
    """What a browser sends when a person presses Enter in the login form: ``method`` ``url``, ``data`` urlencoded."""

    method: str  # "POST", or "GET" with ``data`` as the query of ``url``
    url: str
    data: list[tuple[str, str]]


def form_to_submit(body: bytes, page_url: str, fields: Mapping[str, str]) -> Submission:
    """How to submit the login form on ``page_url``: its own inputs, ``fields`` filled in.

    Only a form with a password input, or with an input for every one of
    ``fields``' names, is a login form. Of those, the one holding most of the
    names is used, a password input deciding a tie. Hidden inputs, such as a
    CSRF token, keep the values the page gave them.
    ValueError when the page has no such form or is no HTML.
    """
    try:
        doc = lxml_html.fromstring(body if body and body.strip() else b"<html></html>")
    except etree.ParserError as exc:  # nothing but a comment, say: no document at all
        raise ValueError(f"The login page at {page_url} holds no HTML document ({exc}).") from None
    wanted = set(fields)

    def fit(f) -> tuple[int, bool]:
        held = wanted & {i.get("name") for i in f.inputs if i.get("name")}
        return len(held), any((i.get("type") or "").strip().lower() == "password" for i in f.iter("input"))

    # Every field goes to the chosen form, the password among them, whether the form has an input
    # for it or not: a search or newsletter form (the real login drawn by JavaScript) must not get it.
    form = max((f for f in doc.forms if fit(f)[1] or fit(f)[0] == len(wanted)), key=fit, default=None)
    if form is None:
        raise ValueError(f"No login form found at {page_url}: no form there has a password input or an input "
                         f"for each login field (a form drawn by JavaScript is not in the page's HTML).")
    # What a browser would submit (lxml's form_values: checked boxes, chosen options, no disabled
    # fields, no submit, image, reset or file inputs; a plain button is never sent either), then
    # the default button that pressing Enter submits with, ``fields`` in place of the page's values.
    for element in form.iter("input"):
        if (element.get("type") or "").strip().lower() == "button":
            element.set("disabled", "")  # our own copy of the page: form_values then leaves it out
    values = [(name, value) for name, value in form.form_values() if name not in fields]
    values.extend(pair for pair in _default_button(form) if pair[0] not in fields)
    values.extend(fields.items())
    action = urljoin(page_url, (form.get("action") or "").strip() or page_url)
    # HTML's form methods: post, get (also the default and what an unknown value means), and dialog, which sends nothing.
    method = (form.get("method") or "get").strip().lower()
    if method == "dialog":
        raise ValueError(f"The login form at {page_url} only closes a dialog; it sends nothing to the site.")
    if method != "post":
        return Submission("GET", urlunsplit(urlsplit(action)._replace(query=urlencode(values), fragment="")), values)
    return Submission("POST", urldefrag(action).url, values)


def _default_button(form) -> list[tuple[str, str]]:
    """The name and value the form's first submit button adds (HTML's implicit submission); none for a nameless one.

    A ``<button>`` submits unless its type says otherwise; an image button
    sends the point clicked, ``name.x`` and ``name.y``.
    """
    for element in form.iter("input", "button"):
        kind = (element.get("type") or "").strip().lower()
        if element.tag == "button" and kind not in ("reset", "button") or kind in ("submit", "image"):
            if "disabled" in element.attrib:
                return []
            name = element.get("name") or ""
            if kind == "image":
                return [(f"{name}.x" if name else "x", "0"), (f"{name}.y" if name else "y", "0")]
            return [(name, element.get("value") or "")] if name else []
    return []

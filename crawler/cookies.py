"""The cookies a site's Set-Cookie headers leave in a jar (name -> value), read as browsers read them.

A login keeps them while it walks its redirects; a private site's crawl keeps
the ones its pages set or renew on the way (``Credentials.renewed_by``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# The most cookies a jar holds: a site setting a new one a page cannot grow the Cookie header without end.
MAX_COOKIES = 50


def _sendable(text: str) -> bool:
    # A cookie's text goes back in a Cookie header: a control character or text beyond
    # Latin-1 would make that header illegal, and the error about it would quote the
    # whole header, secrets included.
    return all(" " <= ch <= "\xff" and ch != "\x7f" for ch in text)


def read_cookies(jar: dict[str, str], set_cookies: Sequence[str], *, deletions: bool = True,
                 secure: bool = True) -> None:
    """Apply Set-Cookie headers to ``jar`` (name → value); an expired or emptied cookie leaves it,
    unless ``deletions`` is false (then such a line changes nothing). ``secure``: the response
    came over https; over http the lines a browser ignores there are skipped (``browser_keeps``).

    Each line is read as RFC 6265 5.2 and browsers read it: the cookie is what
    stands before the first ``;`` (its value quotes included), the rest are
    attributes, whichever they are (``Partitioned``, ``Priority``). A cookie
    whose name or value has a control character or text beyond Latin-1 cannot go
    back in a Cookie header, so it is dropped.
    """
    for header in browser_keeps(set_cookies, secure=secure):
        pair, *attributes = header.split(";")
        name, eq, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name or not (_sendable(name) and _sendable(value)):
            continue  # no "=", or no name: not a cookie (RFC 6265 5.2 steps 2 and 5)
        if not value or _deleted(attributes):
            if deletions:
                jar.pop(name, None)
        elif name in jar or len(jar) < MAX_COOKIES:
            jar[name] = value


def browser_keeps(set_cookies: Sequence[str], *, secure: bool) -> tuple[str, ...]:
    """The Set-Cookie lines a browser takes from a response over https (``secure``) or plain http.

    RFC 6265bis 5.7: a cookie marked Secure comes only from a secure origin; a
    ``__Secure-`` name (matched ignoring case) requires Secure, and a ``__Host-``
    one Secure, Path=/ and no Domain. Kept from an http answer, such a cookie
    would go back in cleartext, which is what Secure forbids.
    """
    return tuple(line for line in set_cookies if _taken(line, secure))


def _taken(line: str, secure: bool) -> bool:
    pair, *attributes = line.split(";")
    name = pair.partition("=")[0].strip().lower()
    known = _attributes(attributes)
    if "secure" in known and not secure:
        return False
    if name.startswith("__host-"):
        return "secure" in known and known.get("path") == "/" and not known.get("domain")
    return "secure" in known or not name.startswith("__secure-")


def _attributes(attributes: list[str]) -> dict[str, str]:
    """A Set-Cookie line's attributes, name (lower-cased) -> value; the last of a name counts (RFC 6265 5.3)."""
    known = {}
    for part in attributes:
        key, _, given = part.partition("=")
        known[key.strip().lower()] = given.strip()
    return known


_DELTA_SECONDS = re.compile(r"-?[0-9]+")


def _deleted(attributes: list[str]) -> bool:
    """Whether a Set-Cookie line's attributes delete its cookie (RFC 6265 5.3 step 3): a valid
    Max-Age decides alone, at zero or below; without one, an Expires date that has passed."""
    known = _attributes(attributes)
    max_age = known.get("max-age", "")
    if _DELTA_SECONDS.fullmatch(max_age):
        return int(max_age) <= 0
    return _expired(known.get("expires", ""))


def _expired(expires: str) -> bool:
    """Whether a cookie's Expires date has passed (a site deleting it); an unreadable date says nothing."""
    try:
        when = parsedate_to_datetime(expires.replace("-", " ")) if expires else None
    except (TypeError, ValueError, IndexError, OverflowError):
        return False
    if when is None:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when <= datetime.now(UTC)

"""Asking a server whether a page changed since a previous crawl (RFC 9110 §13).

A delta crawl sends the validators the page answered with last time
(``If-None-Match`` / ``If-Modified-Since``). The page is unchanged when the
server answers 304, or, for servers that never do, when the body it sends is
byte for byte the one hashed last time: either way it needs no parse.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

from .types import FetchResult


@dataclass(frozen=True, slots=True)
class Validators:
    """What a previous crawl stored about a page that answered 200 without redirecting."""

    etag: str = ""
    last_modified: str = ""
    body_hash: str = ""
    # What the bytes were served as: the same bytes as another type or charset read differently.
    content_type: str = ""
    charset: str = ""

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The conditional request's headers; a server that sent neither validator gets none."""
        headers = []
        if self.etag:
            headers.append((b"If-None-Match", self.etag.encode("latin-1", "replace")))
        if self.last_modified:
            headers.append((b"If-Modified-Since", self.last_modified.encode("latin-1", "replace")))
        return headers


# Headers the page checks read (security_headers_missing) that a 304 need not repeat (RFC 9110 15.4.5):
# a page reused on a 304 keeps the stored answer's, freshened by the 304's, as a cache does (RFC 9111 4.3.4).
KEPT_HEADERS = ("strict-transport-security", "x-content-type-options", "content-security-policy", "x-frame-options")


def body_hash(body: bytes | None) -> str:
    """The decoded body's hash, as stored per page; empty without a body."""
    if body is None:
        return ""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def unchanged(result: FetchResult, previous: Validators) -> bool:
    """Whether ``result`` says the page is what ``previous`` described.

    A 304 only counts when it came for the URL itself (a redirect on the way
    means the page moved), answered validators that were sent (to a request
    without any, only a broken server says "not modified") and names the stored
    version (``same_version``). A 200 only counts when its whole body was read
    and came as the same type and charset.
    """
    if result.error is not None or result.redirects:
        return False
    if result.status == 304:
        return bool(previous.headers()) and same_version(result.headers, previous)
    return (result.status == 200 and result.body is not None and bool(previous.body_hash)
            and (result.content_type, result.charset or "") == (previous.content_type, previous.charset)
            and body_hash(result.body) == previous.body_hash)


def same_version(headers: Mapping[str, str], previous: Validators) -> bool:
    """Whether a 304's own validators, where it repeats them, are the stored ones (RFC 9111 4.3.4).

    A server that answers If-Modified-Since with "not modified since" rather
    than "exactly that date" says 304 to a file rolled back to an older copy,
    but names that copy's date; a cache then must not take the stored answer
    for it, and neither do we. An ETag, where both have one, decides alone; it
    compares weakly, since gzip on the way turns a strong one weak.
    """
    etag = headers.get("etag", "")
    if etag and previous.etag:
        return etag.removeprefix("W/") == previous.etag.removeprefix("W/")
    modified = headers.get("last-modified", "")
    if modified and previous.last_modified and modified != previous.last_modified:
        return _instant(modified) is not None and _instant(modified) == _instant(previous.last_modified)
    return True


def _instant(http_date: str) -> datetime | None:
    """An HTTP date's instant, or None when it is not one."""
    try:
        return parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None

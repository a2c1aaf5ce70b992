"""Asking a server whether a page changed since a previous crawl (RFC 9110 §13).

A delta crawl sends the validators the page answered with last time
(``If-None-Match`` / ``If-Modified-Since``). The page is unchanged when the
server answers 304, or, for servers that never do, when the body it sends is
byte for byte the one hashed last time: either way it needs no parse.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .types import FetchResult


@dataclass(frozen=True, slots=True)
class Validators:
    """What a previous crawl stored about a page that answered 200 without redirecting."""

    etag: str = ""
    last_modified: str = ""
    body_hash: str = ""

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The conditional request's headers; a server that sent neither validator gets none."""
        headers = []
        if self.etag:
            headers.append((b"If-None-Match", self.etag.encode("latin-1", "replace")))
        if self.last_modified:
            headers.append((b"If-Modified-Since", self.last_modified.encode("latin-1", "replace")))
        return headers


def body_hash(body: bytes | None) -> str:
    """The decoded body's hash, as stored per page; empty without a body."""
    if body is None:
        return ""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def unchanged(result: FetchResult, previous: Validators) -> bool:
    """Whether ``result`` says the page is what ``previous`` described.

    A 304 only counts when it came for the URL itself (a redirect on the way
    means the page moved), and a 200 only when its whole body was read.
    """
    if result.error is not None or result.redirects:
        return False
    if result.status == 304:
        return True
    return (result.status == 200 and result.body is not None and bool(previous.body_hash)
            and body_hash(result.body) == previous.body_hash)

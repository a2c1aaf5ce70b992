"""A URL as the fetcher sends it: parsed once, without credentials or fragment, and its origin.

Credentials in a URL never go on the wire in it; ``basic_auth`` turns them into the
Authorization header the fetcher sends only to the URL's own origin.
"""

from __future__ import annotations

import base64
import urllib.parse

import httpx

from .errors import InvalidURLError


def parse_url(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, UnicodeError, ValueError, TypeError) as exc:
        raise InvalidURLError(f"Invalid URL: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise InvalidURLError(
            f"Only http and https URLs are fetched, not {parsed.scheme or 'a relative URL'}"
        )
    if not parsed.host:
        raise InvalidURLError("The URL has no host")
    return parsed


def scheme_of(location: str) -> str:
    try:
        return urllib.parse.urlsplit(location).scheme.lower()
    except ValueError:
        return ""


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    port = url.port or (443 if url.scheme == "https" else 80)
    return url.scheme, url.host, port


def strip(url: httpx.URL) -> httpx.URL:
    """The URL without credentials or fragment (neither belongs on the wire)."""
    if not url.userinfo and not url.fragment and not str(url).endswith("#"):
        return url  # most URLs: building a copy is a second parse
    return url.copy_with(userinfo=b"", fragment=None)


def basic_auth(url: httpx.URL) -> str | None:
    if not url.userinfo:
        return None
    token = base64.b64encode(f"{url.username}:{url.password}".encode()).decode("ascii")
    return f"Basic {token}"

"""A URL already in canonical form, read without httpx's parser.

The fetcher used to parse every URL with ``httpx.URL``, which validates and
re-encodes each component (control characters, IDNA, IPv4 literals, percent
quoting of path and query, dot segments): about a fifth of the CPU of a HEAD
check. The crawl's URLs come out of ``crawler.urls.normalize`` already in the
form httpx would give them, so most need none of it. ``parse`` accepts a URL
only if httpx would leave every part of it unchanged: lower-case http(s)
scheme, a lower-case ASCII host name (not IDNA-encoded) or a valid dotted IPv4 address, no
userinfo, a port that is not the scheme's default, a path of characters httpx
never quotes with no dot segments, an optional query of the same, no
fragment. Anything else returns None and goes through ``httpx.URL`` as before,
so what is fetched never depends on which parser read it
(``tests/crawler/test_wire_url.py`` checks them against each other).
"""

from __future__ import annotations

import functools
import ipaddress
import re

import httpx

_PLAIN = re.compile(
    r"(https?)://"
    r"((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)"
    r"(?::([1-9][0-9]{0,4}))?"
    # Unreserved, sub-delims, ":" and "@", and escapes httpx keeps as they are:
    # "%" here, and each one checked below to start an escape (_LONE_PERCENT).
    # One character class repeated is matched in a tight loop; the alternation
    # it replaces (a character, or "%" and two hex digits) was tried character
    # by character and cost about as much as the rest of a HEAD check's parsing.
    r"(/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*)"
    r"(\?[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*)?"
)
# A "%" that does not start an escape (two hex digits): httpx would quote it.
_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_IPV4_STYLE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# httpx's own limit; longer URLs go to it, to be refused there.
_MAX_LENGTH = 65536


class WireURL:
    """The parts of a URL the fetcher and its pool read, with httpx.URL's names and values."""

    __slots__ = ("_text", "scheme", "host", "port", "raw_path")

    userinfo = b""
    fragment = ""

    def __init__(self, text: str, scheme: str, host: str, port: int | None, raw_path: bytes) -> None:
        self._text = text
        self.scheme = scheme
        self.host = host
        self.port = port
        self.raw_path = raw_path

    @property
    def raw_scheme(self) -> bytes:
        return self.scheme.encode("ascii")

    @property
    def raw_host(self) -> bytes:
        return self.host.encode("ascii")

    @property
    def netloc(self) -> bytes:
        host = self.host.encode("ascii")
        return host if self.port is None else b"%s:%d" % (host, self.port)

    def join(self, url: str) -> httpx.URL:
        """Resolve a redirect's Location against this URL (rare: httpx does it)."""
        return httpx.URL(self._text).join(url)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"WireURL({self._text!r})"


def parse(url: str) -> WireURL | None:
    """``url`` as a WireURL when it is already canonical, else None."""
    if len(url) > _MAX_LENGTH:
        return None
    match = _PLAIN.fullmatch(url)
    if match is None:
        return None
    scheme, host, port_text, path, query = match.groups()
    if "%" in url and _LONE_PERCENT.search(url, match.start(4)):
        return None
    if "/." in path and any(segment in (".", "..") for segment in path.split("/")):
        return None  # httpx would remove the dot segments
    if "xn--" in host:
        return None  # httpx.URL.host gives an IDNA name decoded
    if _IPV4_STYLE.fullmatch(host) and not _valid_ipv4(host):
        return None  # httpx refuses it, with its own message
    port = int(port_text) if port_text else None
    if port == _DEFAULT_PORTS[scheme]:
        return None  # httpx drops it, so its text differs
    raw_path = (path + query if query is not None else path).encode("ascii")
    return WireURL(url, scheme, host, port, raw_path)


@functools.lru_cache(maxsize=256)
def _valid_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True

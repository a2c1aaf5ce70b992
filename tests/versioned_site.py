"""A loopback site of numbered pages that answers conditional requests, for delta crawls.

Each page has a version a test bumps between audits. ``validators`` says what
the server sends and honours: ``"etag"`` (ETag and If-None-Match), ``"date"``
(Last-Modified and If-Modified-Since) or ``"none"`` (neither: a server that
never answers 304). ``full`` and ``not_modified`` count the answers per path.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from email.utils import formatdate

from werkzeug.wrappers import Request, Response

from tests.loopback import Loopback

STAMP = 1_790_000_000  # a fixed Last-Modified for version 1 of every page
NOT_FOUND = b"<html><head><title>Not found</title></head><body>Gone</body></html>"


class VersionedSite(Loopback):
    """``size`` pages, /p/0 (the home page) to /p/<size-1>.

    Every page links to /missing (a broken link), and page 0 to /p/<size>, which
    does not exist either; ``bump(n)`` changes page n's title and body.
    """

    def __init__(self, size: int, *, validators: str = "etag"):
        super().__init__(self._answer)
        self.size = size
        self.validators = validators
        self.versions = [1] * size
        self.full: Counter[str] = Counter()
        self.not_modified: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _answer(self, request: Request) -> Response:
        page = self.page(request.path)
        if page is None:
            return Response(NOT_FOUND, status=404, content_type="text/html; charset=utf-8")
        body, etag, modified = page
        headers = {}
        if self.validators == "etag":
            headers["ETag"] = etag
            fresh = request.headers.get("If-None-Match") == etag
        elif self.validators == "date":
            headers["Last-Modified"] = modified
            fresh = request.headers.get("If-Modified-Since") == modified
        else:
            fresh = False
        if fresh:
            self.count(self.not_modified, request.path)
            return Response(status=304, headers=headers)
        self.count(self.full, request.path)
        return Response(body, headers=headers, content_type="text/html; charset=utf-8")

    def url(self, path: str = "/p/0") -> str:
        return super().url(path)

    def bump(self, n: int) -> None:
        self.versions[n] += 1

    def count(self, counter: Counter, path: str) -> None:
        with self._lock:
            counter[path] += 1

    def reset_counts(self) -> None:
        with self._lock:
            self.full.clear()
            self.not_modified.clear()

    def page(self, path: str) -> tuple[bytes, str, str] | None:
        if path == "/robots.txt" or not path.startswith("/p/"):
            return None
        try:
            n = int(path.removeprefix("/p/"))
        except ValueError:
            return None
        if not 0 <= n < self.size:
            return None
        version = self.versions[n]
        # The home page links every page (one click deep, as a docs index does,
        # inside the per-template trap budget) and one past the end; each page its next three.
        following = range(1, self.size + 1) if n == 0 else range(n + 1, min(n + 4, self.size))
        links = "".join(f'<a href="/p/{m}">page {m}</a>' for m in following)
        # Version 1 has no description: a page-level issue the delta crawl must carry.
        description = f'<meta name="description" content="Page {n}, edited {version - 1} times, with enough ' \
                      f'words to pass the length check of descriptions.">' if version > 1 else ""
        body = (f'<!doctype html><html lang="en"><head><title>Page {n} version {version} of the site</title>'
                f'{description}<link rel="canonical" href="/p/{n}"></head><body><h1>Page {n}</h1>'
                f'<p>Version {version} of page {n}.</p><a href="/p/0">home</a><a href="/missing">gone</a>'
                f'{links}</body></html>').encode()
        etag = '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'
        modified = formatdate(STAMP + version, usegmt=True)
        return body, etag, modified

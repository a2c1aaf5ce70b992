"""A loopback site whose answer per path (status, headers, body, type, delay) a test sets and changes.

It answers conditional requests as a cache-aware server does: a 304 with the
ETag (or Last-Modified) when the request's validator matches the page's. With
``honour=False`` a page never answers 304, as some servers never do.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from pytest_httpserver import HTTPServer
from werkzeug.wrappers import Request, Response

from tests.loopback import Loopback

NOT_FOUND = b"<html><head><title>Not found</title></head><body>Not found</body></html>"


@dataclass
class Answer:
    body: str | bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    ctype: str = "text/html; charset=utf-8"
    delay: float = 0.0  # seconds before the answer starts: a slow server
    honour: bool = True  # answers 304 to a matching validator


def html_page(title: str, *links: str, head: str = "") -> Answer:
    """A page titled ``title`` (its H1 too) linking ``links``; ``head`` goes into its <head>."""
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return Answer(f"<!doctype html><html><head><title>{title}</title>{head}</head>"
                  f"<body><h1>{title}</h1>{anchors}</body></html>")


def listing(site, paths, *, rules: str = "Allow: /") -> dict[str, Answer]:
    """A robots.txt (``rules`` for every agent) naming a sitemap that lists ``paths`` of ``site``."""
    urls = "".join(f"<url><loc>{site.url(path)}</loc></url>" for path in paths)
    return {
        "/robots.txt": Answer(f"User-agent: *\n{rules}\nSitemap: {site.url('/sitemap.xml')}\n", ctype="text/plain"),
        "/sitemap.xml": Answer(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>',
                               ctype="application/xml"),
    }


class ScriptedSite(Loopback):
    """``pages`` maps a path to its Answer; any other path is a 404. ``requests`` counts the paths asked for."""

    def __init__(self):
        # Threaded, so a slow page does not hold up the others.
        self.server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
        self.server.expect_request("").respond_with_handler(self._answer)
        self.pages: dict[str, Answer] = {}
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _answer(self, request: Request) -> Response:
        with self._lock:
            self.requests[request.path] += 1
            page = self.pages.get(request.path)
        if page is None:
            return Response(NOT_FOUND, status=404, content_type="text/html; charset=utf-8")
        if page.delay:
            time.sleep(page.delay)
        etag, modified = page.headers.get("ETag"), page.headers.get("Last-Modified")
        if page.honour and etag and request.headers.get("If-None-Match") == etag:
            return Response(status=304, headers={"ETag": etag})
        if page.honour and modified and request.headers.get("If-Modified-Since") == modified:
            return Response(status=304, headers={"Last-Modified": modified})
        body = page.body.encode() if isinstance(page.body, str) else page.body
        return Response(body, status=page.status, headers=page.headers, content_type=page.ctype)

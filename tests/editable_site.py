"""A loopback site whose pages a test edits between audits: what changed since last time, seen for real."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

NOT_FOUND = "<html><head><title>Not found</title></head><body>Not found</body></html>"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self._answer(body=True)

    def do_HEAD(self):
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        status, content_type, payload = self.server.site.answer(urlsplit(self.path).path)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def log_message(self, format, *args):
        pass


class EditableSite:
    """A threaded HTTP/1.1 server on 127.0.0.1 answering from ``pages``.

    ``pages`` maps a path to HTML bytes (a 200) or to (status, html); any other
    path is a 404. With ``sitemap=True`` it also serves a robots.txt naming a
    sitemap that lists the home page. ``requests`` counts the paths asked for.
    """

    def __init__(self, *, sitemap: bool = False):
        self.pages: dict[str, bytes | tuple[int, str]] = {}
        self.requests: Counter[str] = Counter()
        self.sitemap = sitemap
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.site = self
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def url(self, path: str = "/") -> str:
        return self.base + path

    def answer(self, path: str) -> tuple[int, str, bytes]:
        self.requests[path] += 1
        if self.sitemap and path == "/robots.txt":
            return 200, "text/plain", f"User-agent: *\nDisallow:\nSitemap: {self.base}/sitemap.xml\n".encode()
        if self.sitemap and path == "/sitemap.xml":
            return 200, "application/xml", (
                '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{self.base}/</loc></url></urlset>").encode()
        with self._lock:
            page = self.pages.get(path)
        if page is None:
            return 404, "text/html; charset=utf-8", NOT_FOUND.encode()
        status, html = page if isinstance(page, tuple) else (200, page)
        return status, "text/html; charset=utf-8", html.encode() if isinstance(html, str) else html

    def set(self, **changes) -> None:
        """Replace pages by path (None removes one), all at once."""
        with self._lock:
            for path, page in changes.items():
                if page is None:
                    self.pages.pop(path, None)
                else:
                    self.pages[path] = page

    def __enter__(self) -> EditableSite:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

"""A generated site of N linked pages on 127.0.0.1, with an optional delay and poison page.

Page i links to pages 2i and 2i+1 (a binary tree, so click depth is
floor(log2(i))), to "/" and to one missing page per ten pages. Every request is
counted, so tests can assert that each page was fetched and stored once, and
so are the requests answered at once (``peak``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class GridSite:
    def __init__(self, pages: int = 40, delay: float = 0.0):
        self.pages = pages
        self.delay = delay
        self.counts: Counter = Counter()
        self._held = 0
        # Requests being answered at once, and the most there ever were.
        self._active = 0
        self.peak = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # Every page path the crawl should store: the tree plus the broken targets.
    def page_paths(self) -> set[str]:
        paths = {self.path(i) for i in range(1, self.pages + 1)}
        paths |= {f"/missing-{i}" for i in range(1, self.pages + 1) if i % 10 == 0}
        return paths

    @staticmethod
    def path(i: int) -> str:
        return "/" if i == 1 else f"/p/{i}"

    def body(self, i: int) -> bytes:
        links = [self.path(j) for j in (2 * i, 2 * i + 1) if j <= self.pages] + ["/"]
        if i % 10 == 0:
            links.append(f"/missing-{i}")
        anchors = "".join(f'<a href="{href}">link {href}</a> ' for href in links)
        return (
            f"<!doctype html><html lang=en><head><title>Grid page number {i} of the test site</title>"
            f'<meta name="description" content="Page {i} of a generated grid site used by the orchestration '
            f'tests of Siteward."></head><body><h1>Page {i}</h1><p>{"words " * 50}</p>{anchors}</body></html>'
        ).encode()

    def url(self, path: str = "/") -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def hits(self, path: str) -> int:
        with self._lock:
            return self.counts[path]

    def serving(self) -> bool:
        """Whether a request is held in its delay: its answer is not sent yet, so the crawler waits on it."""
        with self._lock:
            return self._held > 0

    def start(self) -> GridSite:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                with site._lock:
                    site.counts[self.path] += 1
                    site._held += bool(site.delay)
                    site._active += 1
                    site.peak = max(site.peak, site._active)
                self.answer()

            def answer(self):
                if site.delay:
                    try:
                        time.sleep(site.delay)
                    finally:
                        with site._lock:
                            site._held -= 1
                status, body = 404, b"<html><head><title>Not found</title></head><body>gone</body></html>"
                if self.path == "/robots.txt":
                    status, body = 404, b"no robots here"
                elif self.path == "/":
                    status, body = 200, site.body(1)
                elif self.path.startswith("/p/") and self.path[3:].isdigit() and 1 < int(self.path[3:]) <= site.pages:
                    status, body = 200, site.body(int(self.path[3:]))
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with site._lock:  # before the body: the client cannot be done with it yet
                    site._active -= 1
                self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

"""A small generated website served on 127.0.0.1, for end-to-end crawl tests.

``FixtureSite`` starts two threaded HTTP/1.1 servers on ephemeral loopback
ports: the site itself and a second origin ("elsewhere") that plays the
external web and hosts a redirect into the site. The site has a few dozen
pages with known click depths, broken links, a permanent redirect, a 500, a
noindex page, a robots.txt with a Disallow and a Sitemap line, a sitemap.xml
listing one page nothing links to, and an endless calendar. Every request is
counted per (method, path) so tests can assert what was and was not fetched.

Usable from any test (sync or async, no pytest plugin needed)::

    with FixtureSite() as site:
        crawl(site.url("/"))
        assert site.hits("/private/secret") == 0
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# Click depth from "/" of every HTML page reachable through links (not the
# calendar, which is endless, nor the pages only the sitemap leads to).
BLOG_POSTS = 8
PRODUCTS = 6
EXPECTED_DEPTHS: dict[str, int] = {
    "/": 0,
    "/about": 1,
    "/blog/": 1,
    "/products/": 1,
    "/contact": 1,
    "/old-products": 1,  # 301 to /products/
    "/broken-home": 1,  # 404
    "/calendar/2026-01": 1,
    "/team": 2,
    "/noindex-page": 2,
    "/server-error": 2,  # 500
    **{f"/blog/post-{n}": 2 for n in range(1, BLOG_POSTS + 1)},
    **{f"/products/item-{n}": 2 for n in range(1, PRODUCTS + 1)},
    **{f"/products/item-{n}/specs": 3 for n in range(1, PRODUCTS + 1)},
    "/blog/post-99": 3,  # 404, linked from post 3
}
BROKEN_INTERNAL = {"/broken-home": 404, "/blog/post-99": 404, "/server-error": 500}
REDIRECTS = {"/old-products": "/products/"}
DISALLOWED = "/private/secret"  # linked from /about, disallowed by robots.txt
SITEMAP_ONLY = "/landing/spring-sale"  # listed in sitemap.xml, linked from nowhere
SITEMAP_ONLY_CHILD = "/landing/spring-sale/terms"  # linked only from the sitemap-only page
NOINDEX = "/noindex-page"
CALENDAR_PREFIX = "/calendar/"
EXTERNAL_OK = "/ok"
EXTERNAL_GONE = "/gone"
START_REDIRECT = "/start"  # on "elsewhere": 302 to the site's home page


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


def _page(title: str, links: list[str], *, extra_head: str = "", extra_body: str = "") -> bytes:
    anchors = "\n".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    words = " ".join(["crawler", "fixture", "words"] * 80)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{title} | Fixture site for crawl tests</title>"
        f'<meta name="description" content="{title}: a page of the generated fixture site '
        'that the crawl tests walk from end to end on loopback.">'
        f"{extra_head}</head><body><h1>{title}</h1><p>{words}</p><ul>{anchors}</ul>"
        f"{extra_body}</body></html>"
    ).encode()


def _next_month(year: int, month: int) -> tuple[int, int]:
    return (year + 1, 1) if month == 12 else (year, month + 1)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, *, send_body: bool) -> None:
        path = urlsplit(self.path).path
        self.server.record(self.command, path)
        response = self.server.route(path)
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: object) -> None:
        # Test output stays readable; the request log lives in FixtureSite.requests.
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, route: Callable[[str], Response], record: Callable[[str, str], None]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.route = route
        self.record = record

    def handle_error(self, request, client_address) -> None:
        # Clients closing idle keep-alive connections at the end of a crawl is
        # normal; anything else is a bug in the fixture and should be seen.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FixtureSite:
    """The site and its "elsewhere" origin; use as a context manager."""

    def __init__(self, *, robots_status: int = 200) -> None:
        # Any other status serves robots.txt as an error page with that status
        # (a 503 must stop the whole crawl, a 404 allow everything).
        self.robots_status = robots_status
        self.requests: Counter[tuple[str, str]] = Counter()  # (method, path) on the site
        self.elsewhere_requests: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._site = _Server(self._route_site, self._recorder(self.requests))
        self._elsewhere = _Server(self._route_elsewhere, self._recorder(self.elsewhere_requests))
        self.base = f"http://127.0.0.1:{self._site.server_address[1]}"
        self.elsewhere = f"http://127.0.0.1:{self._elsewhere.server_address[1]}"
        self._threads: list[threading.Thread] = []

    def url(self, path: str) -> str:
        return self.base + path

    def hits(self, path: str, method: str | None = None) -> int:
        """Requests the site received for ``path`` (any method unless given)."""
        with self._lock:
            return sum(
                n for (m, p), n in self.requests.items() if p == path and method in (None, m)
            )

    def calendar_hits(self) -> int:
        with self._lock:
            return sum(n for (_, p), n in self.requests.items() if p.startswith(CALENDAR_PREFIX))

    def start(self) -> FixtureSite:
        for server in (self._site, self._elsewhere):
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
            thread.daemon = True
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in (self._site, self._elsewhere):
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> FixtureSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _recorder(self, counter: Counter) -> Callable[[str, str], None]:
        def record(method: str, path: str) -> None:
            with self._lock:
                counter[(method, path)] += 1

        return record

    def _route_elsewhere(self, path: str) -> Response:
        if path == EXTERNAL_OK:
            return Response(200, _page("Elsewhere", []))
        if path == START_REDIRECT:
            return Response(302, headers=(("Location", self.base + "/"),))
        return Response(404, b"not here", "text/plain")

    def _route_site(self, path: str) -> Response:
        ext_ok, ext_gone = self.elsewhere + EXTERNAL_OK, self.elsewhere + EXTERNAL_GONE
        if path == "/robots.txt" and self.robots_status != 200:
            return Response(self.robots_status, b"<html><body>robots error</body></html>")
        if path == "/robots.txt":
            body = f"User-agent: *\nDisallow: /private/\n\nSitemap: {self.base}/sitemap.xml\n"
            return Response(200, body.encode(), "text/plain")
        if path == "/sitemap.xml":
            locs = ["/", "/about", "/blog/post-2", SITEMAP_ONLY]
            entries = "".join(f"<url><loc>{self.base}{p}</loc></url>" for p in locs)
            body = (
                '<?xml version="1.0" encoding="UTF-8"?>'
                f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
            )
            return Response(200, body.encode(), "application/xml")
        if path == "/":
            links = [
                "/about",
                "/about#team",  # the same page once the fragment is dropped
                "/blog/",
                "/products/",
                "/contact",
                "/old-products",
                "/broken-home",
                "/calendar/2026-01",
                ext_ok,
                ext_gone,
                "mailto:team@example.invalid",
                "javascript:void(0)",
                "http://[not-a-host/",
            ]
            return Response(200, _page("Home", links))
        if path == "/about":
            return Response(200, _page("About us", ["/", "/team", DISALLOWED, ext_ok]))
        if path == "/team":
            return Response(200, _page("Team", ["/about"]))
        if path == DISALLOWED:
            return Response(200, _page("Secret", []))
        if path == "/contact":
            return Response(200, _page("Contact", [NOINDEX, "/server-error"]))
        if path == NOINDEX:
            head = '<meta name="robots" content="noindex">'
            return Response(200, _page("Not for search engines", ["/"], extra_head=head))
        if path == "/server-error":
            return Response(500, b"<html><body>boom</body></html>")
        if path in REDIRECTS:
            return Response(301, headers=(("Location", REDIRECTS[path]),))
        if path == "/blog/":
            posts = [f"/blog/post-{n}" for n in range(1, BLOG_POSTS + 1)]
            return Response(200, _page("Blog", posts))
        if path.startswith("/blog/post-"):
            number = path.removeprefix("/blog/post-")
            if number.isdigit() and 1 <= int(number) <= BLOG_POSTS:
                n = int(number)
                links = ["/blog/"] + ([f"/blog/post-{n + 1}"] if n < BLOG_POSTS else [])
                if n == 3:
                    links.append("/blog/post-99")
                return Response(200, _page(f"Post {n}", links))
        if path == "/products/":
            items = [f"/products/item-{n}" for n in range(1, PRODUCTS + 1)]
            return Response(200, _page("Products", items))
        if path.startswith("/products/item-"):
            rest = path.removeprefix("/products/item-")
            number, _, tail = rest.partition("/")
            if number.isdigit() and 1 <= int(number) <= PRODUCTS and tail in ("", "specs"):
                links = [f"/products/item-{number}/specs"] if not tail else ["/products/"]
                return Response(200, _page(f"Item {number} {tail}".strip(), links))
        if path == SITEMAP_ONLY:
            return Response(200, _page("Spring sale", [SITEMAP_ONLY_CHILD]))
        if path == SITEMAP_ONLY_CHILD:
            return Response(200, _page("Spring sale terms", [SITEMAP_ONLY]))
        if path.startswith(CALENDAR_PREFIX):
            year, _, month = path.removeprefix(CALENDAR_PREFIX).partition("-")
            if year.isdigit() and month.isdigit():
                next_year, next_month = _next_month(int(year), int(month))
                link = f"{CALENDAR_PREFIX}{next_year}-{next_month:02d}"
                return Response(200, _page(f"Calendar {year}-{month}", [link]))
        return Response(404, b"<html><body>Not found</body></html>")

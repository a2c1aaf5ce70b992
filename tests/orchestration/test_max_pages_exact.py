"""max_pages is exact: a crawl stores exactly that many pages, counting the URLs that redirect.

"Pages crawled" on screen is the audit's page rows (kind page), a URL that
redirected included: it was fetched and has its own row and status. So the
budget counts those rows, the typed start URL that redirects to the site's real
home page among them. (With max_pages=1 such a start stores both rows: the page
it lands on is what the crawl is anchored on, so it cannot be left out.)
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Page
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

PAGES = 200


def _body(i: int) -> bytes:
    # Page i links to 2i and 2i+1 (a binary tree), home, and a moved URL per page.
    links = [f"/p/{j}" for j in (2 * i, 2 * i + 1) if j <= PAGES] + ["/home/", f"/moved/{i}"]
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return (f"<!doctype html><html lang=en><head><title>Page {i} of a redirecting site</title></head>"
            f"<body><h1>Page {i}</h1>{anchors}</body></html>").encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        status, location, body = 404, None, b"<html><head><title>Not found</title></head></html>"
        if self.path == "/":
            status, location, body = 301, "/home/", b""
        elif self.path.startswith("/moved/"):
            status, location, body = 301, f"/p/{self.path[7:]}", b""
        elif self.path == "/home/":
            status, body = 200, _body(1)
        elif self.path.startswith("/p/") and self.path[3:].isdigit() and 1 < int(self.path[3:]) <= PAGES:
            status, body = 200, _body(int(self.path[3:]))
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def redirecting_site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("max_pages", [2, 20, 31])
def test_it_stores_exactly_max_pages_pages_when_the_start_url_redirects(owner, redirecting_site, fast_settings,
                                                                         max_pages):
    audit = make_audit(owner, start_url=f"{redirecting_site}/", allow_private=True, max_pages=max_pages,
                       max_depth=10, check_external=False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    pages = Page.objects.filter(audit=audit, kind=Page.Kind.PAGE)
    assert pages.count() == max_pages
    assert audit.pages_crawled == max_pages
    # The typed start URL is one of them, with its own answer.
    assert pages.filter(url=f"{redirecting_site}/", redirect_count=1).exists()

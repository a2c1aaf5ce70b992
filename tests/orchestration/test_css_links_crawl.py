"""A stylesheet's url() and @import targets are checked like the page's own links: after a
real crawl of a loopback site, a missing import and a missing font are broken_resource
issues on the stylesheet's URL, and the image it uses is checked and fine."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue, LinkEdge
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

HOME = (b'<!doctype html><html lang="en"><head><title>Home of the stylesheet test site</title>'
        b'<link rel="stylesheet" href="/static/site.css"></head>'
        b"<body><h1>Home</h1><p>" + b"words " * 60 + b"</p></body></html>")
SITE_CSS = b"""@import url("missing.css");
/* url(commented.png) is not a target */
@font-face { font-family: Body; src: url(../fonts/missing.woff2) format("woff2"); }
body { background: url('img/bg.png') repeat-x; }
.icon { background: url(data:image/png;base64,iVBORw0KGgo=); }
"""
ROUTES = {
    "/": (HOME, "text/html; charset=utf-8"),
    "/static/site.css": (SITE_CSS, "text/css"),
    "/static/img/bg.png": (b"\x89PNG\r\n\x1a\n", "image/png"),
}


class Site:
    def __init__(self):
        self.hits: Counter[tuple[str, str]] = Counter()

    def __enter__(self):
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                hits[(self.command, self.path)] += 1
                body, kind = ROUTES.get(self.path, (b"not found", "text/plain"))
                self.send_response(200 if self.path in ROUTES else 404)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


def test_a_stylesheets_missing_import_and_font_are_broken_resources_on_the_stylesheet(owner, fast_settings):
    with Site() as site:
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=20, max_depth=3)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    sheet = site.url("/static/site.css")
    edges = set(LinkEdge.objects.filter(audit=audit, source_url=sheet).values_list("target_url", "tag"))
    assert edges == {
        (site.url("/static/missing.css"), "css-import"),
        (site.url("/fonts/missing.woff2"), "css"),
        (site.url("/static/img/bg.png"), "css"),
    }
    broken = Issue.objects.filter(audit=audit, code="broken_resource")
    assert {(i.url, i.target_url) for i in broken} == {
        (sheet, site.url("/static/missing.css")),
        (sheet, site.url("/fonts/missing.woff2")),
    }
    assert all(i.page is not None and i.page.url == sheet for i in broken)
    pages = {p.url: p for p in audit.pages.all()}
    assert pages[site.url("/static/img/bg.png")].kind == "resource"
    assert pages[site.url("/static/img/bg.png")].status_code == 200
    assert pages[sheet].kind == "resource" and pages[sheet].status_code == 200
    # The image and the missing files are only checked; the stylesheet alone is read (once).
    assert site.hits[("GET", "/static/site.css")] == 1
    assert site.hits[("GET", "/static/img/bg.png")] == 0
    assert site.hits[("HEAD", "/static/img/bg.png")] == 1
    assert not any("commented" in path for _, path in site.hits)

"""A loopback site built by JavaScript: its titles, canonicals and links exist only after its script runs.

``/`` and ``/app/<n>`` (n < pages) are empty shells that ``/app.js`` fills in:
a title, a canonical, a paragraph of words, links to the other app pages.
Hostile pages: ``/spy`` (its script asks for ``other`` (another loopback
port, by fetch and by WebSocket) and the cloud metadata address), ``/spin`` (a script that never yields),
``/chatty`` (a request every 100 ms, so the network never goes idle),
``/broken`` (a script error and a missing script). ``requests`` counts the
paths asked for; ``in_flight`` is how many answers are being written.
"""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SHELL = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Loading</title>{head}</head>
<body><noscript>Please enable JavaScript to use this app.</noscript><div id="root"></div>{scripts}</body></html>"""

APP_JS = """
const pages = %(pages)d;
const here = location.pathname;
const n = here === "/" ? -1 : Number(here.split("/").pop());
document.title = n < 0 ? "Home of the rendered app" : `App page ${n} of the rendered app`;
const canonical = document.createElement("link");
canonical.rel = "canonical"; canonical.href = location.origin + here;
document.head.appendChild(canonical);
const root = document.getElementById("root");
const text = document.createElement("p");
text.textContent = ("Words written by the script for this page. ").repeat(30);
root.appendChild(text);
for (let m = 0; m < pages; m++) {
  if (m === n) continue;
  const a = document.createElement("a"); a.href = `/app/${m}`; a.textContent = `Page ${m}`;
  root.appendChild(a);
}
"""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        site = self.server.site
        path = urlsplit(self.path).path
        with site.lock:
            site.requests[path] += 1
            site.in_flight += 1
            site.most_in_flight = max(site.most_in_flight, site.in_flight)
        try:
            status, content_type, body = site.answer(path)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        finally:
            with site.lock:
                site.in_flight -= 1

    def log_message(self, format, *args):
        pass


class RenderSite:
    def __init__(self, pages: int = 4, *, other: str = "http://127.0.0.1:9"):
        self.pages = pages
        self.other = other
        self.requests: Counter[str] = Counter()
        self.in_flight = 0
        self.most_in_flight = 0
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.site = self
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def url(self, path: str = "/") -> str:
        return self.base + path

    def answer(self, path: str) -> tuple[int, str, bytes]:
        html = "text/html; charset=utf-8"
        script = '<script src="/app.js"></script>'
        if path == "/robots.txt":
            return 200, "text/plain", b"User-agent: *\nDisallow: /private\n"
        if path == "/app.js":
            return 200, "application/javascript", (APP_JS % {"pages": self.pages}).encode()
        if path == "/" or (path.startswith("/app/") and path.removeprefix("/app/").isdigit()
                           and int(path.removeprefix("/app/")) < self.pages):
            return 200, html, SHELL.format(head="", scripts=script).encode()
        if path == "/spy":
            spy = (f'<script>fetch("{self.other}/secret").catch(() => 0);'
                   'fetch("http://169.254.169.254/latest/meta-data/").catch(() => 0);'
                   'fetch("/private/data").catch(() => 0);'
                   f'try {{ new WebSocket("{self.other.replace("http", "ws", 1)}/socket"); }} catch (e) {{}}</script>')
            return 200, html, SHELL.format(head="", scripts=script + spy).encode()
        if path == "/spin":
            return 200, html, SHELL.format(head="", scripts="<script>while (true) {}</script>").encode()
        if path == "/chatty":
            chatty = '<script>setInterval(() => fetch("/ping?" + Date.now()).catch(() => 0), 100);</script>'
            return 200, html, SHELL.format(head="", scripts=script + chatty).encode()
        if path == "/ping":
            return 200, "text/plain", b"pong"
        if path == "/broken":
            broken = '<script src="/missing.js"></script><script>undefinedFunction();</script>'
            return 200, html, SHELL.format(head="", scripts=script + broken).encode()
        return 404, html, b"<html><head><title>Not found</title></head><body>Not found</body></html>"

    def __enter__(self) -> RenderSite:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

"""A loopback site built by JavaScript: its titles, canonicals and links exist only after its script runs.

``/`` and ``/app/<n>`` (n < pages) are empty shells that ``/app.js`` fills in:
a title, a canonical, a paragraph of words, links to the other app pages.
Hostile pages: ``/spy`` (its script asks for ``other`` (another loopback
port, by fetch and by WebSocket) and the cloud metadata address), ``/framed`` (a sandboxed frame, an
origin of its own, reads ``/account/secret`` and the page's title shows what it read), ``/spin`` (a script that never yields),
``/chatty`` (a request every 100 ms, so the network never goes idle),
``/broken`` (a script error and a missing script). ``requests`` counts the
paths asked for.
"""

from __future__ import annotations

from collections import Counter

from werkzeug.wrappers import Request, Response

from tests.loopback import Loopback

SHELL = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Loading</title>{head}</head>
<body><noscript>Please enable JavaScript to use this app.</noscript><div id="root"></div>{scripts}</body></html>"""

APP_JS = """
const pages = %(pages)d;
const here = location.pathname;
const n = here === "/" ? -1 : Number(here.split("/").pop());
if (%(catch_all)s && !(n < pages)) {  // an unknown route of a catch-all app: its "not found" view, under the app's own title
  document.title = "The rendered app";
  const sorry = document.createElement("p");
  sorry.textContent = ("Sorry, nothing of this app lives at this address. ").repeat(30);
  document.getElementById("root").appendChild(sorry);
  throw new Error("no such route");
}
if (%(catch_all)s && n < 0) { const a = document.createElement("a"); a.href = "/app/99"; document.body.appendChild(a); }
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


class RenderSite(Loopback):
    def __init__(self, pages: int = 4, *, other: str = "http://127.0.0.1:9", stun_port: int = 9,
                 catch_all: bool = False):
        super().__init__(self._answer)
        self.pages = pages
        # An app whose server answers every unknown path with its shell (200), and whose home links a dead route.
        self.catch_all = catch_all
        self.other = other
        self.stun_port = stun_port
        self.requests: Counter[str] = Counter()
        self.methods: Counter[tuple[str, str]] = Counter()

    def _answer(self, request: Request) -> Response:
        self.requests[request.path] += 1
        self.methods[request.method, request.path] += 1
        if request.path == "/go-private":  # a redirect into what robots.txt disallows
            return Response(b"", status=302, headers={"Location": "/private/moved"})
        status, content_type, body = self.answer(request.path)
        return Response(body, status=status, content_type=content_type)

    def answer(self, path: str) -> tuple[int, str, bytes]:
        html = "text/html; charset=utf-8"
        script = '<script src="/app.js"></script>'
        if path == "/robots.txt":
            return 200, "text/plain", b"User-agent: *\nDisallow: /private\n"
        if path == "/app.js":
            return 200, "application/javascript", (
                APP_JS % {"pages": self.pages, "catch_all": "true" if self.catch_all else "false"}).encode()
        if path == "/" or (path.startswith("/app/") and path.removeprefix("/app/").isdigit()
                           and int(path.removeprefix("/app/")) < self.pages):
            return 200, html, SHELL.format(head="", scripts=script).encode()
        if path == "/spy":
            spy = (f'<script>fetch("{self.other}/secret").catch(() => 0);'
                   'fetch("http://169.254.169.254/latest/meta-data/").catch(() => 0);'
                   'fetch("/private/data").catch(() => 0);'
                   'fetch("/go-private").catch(() => 0);'
                   f'try {{ new WebSocket("{self.other.replace("http", "ws", 1)}/socket"); }} catch (e) {{}}</script>')
            return 200, html, SHELL.format(head="", scripts=script + spy).encode()
        if path == "/framed":  # a third party's frame (sandboxed: an origin of its own) reading the site
            frame = ("<script>fetch('/account/secret').then(r => r.text()).then(t => parent.postMessage(t, '*'))"
                     ".catch(() => parent.postMessage('refused', '*'));</script>")
            iframe = f'<iframe sandbox="allow-scripts" srcdoc="{frame}"></iframe>'
            # The page shows what the frame read, and keeps the network busy until it has (10 s at most),
            # so a loaded machine still runs the frame before the page is read.
            wait = ("<script>let read = false; addEventListener('message', e => {"
                    " document.title = 'Frame read: ' + e.data; read = true; });"
                    "(function ping(n) { if (!read && n < 100) fetch('/ping').catch(() => 0)"
                    ".finally(() => setTimeout(() => ping(n + 1), 100)); })(0);</script>")
            return 200, html, SHELL.format(head="", scripts=iframe + wait).encode()
        if path == "/rtc":  # WebRTC: UDP that no HTTP proxy carries, to a STUN server the page names
            rtc = (f"<script>const pc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{self.stun_port}'}}]}});"
                   "pc.createDataChannel('x'); pc.createOffer().then(o => pc.setLocalDescription(o));</script>")
            return 200, html, SHELL.format(head="", scripts=rtc).encode()
        if path == "/retry":  # a script its server cannot serve now
            return 200, html, SHELL.format(head="", scripts='<script src="/unavailable.js"></script>').encode()
        if path == "/unavailable.js":
            return 503, "text/plain", b"try later"
        if path == "/shadow":  # navigation inside a web component's open shadow root
            shadow = ("<script>customElements.define('site-nav', class extends HTMLElement { constructor() { super();"
                      " this.attachShadow({mode: 'open'}).innerHTML = '<a href=\"/app/1\">Page 1</a>'; } });"
                      "</script><site-nav></site-nav>")
            return 200, html, SHELL.format(head="", scripts=shadow).encode()
        if path == "/popups":  # a storm of windows, each a renderer of its own that no route reaches
            popups = ("<script>let opened = 0; for (let i = 0; i < 200; i++) if (window.open('/app/0')) opened++;"
                      "document.title = `Opened ${opened} windows of the popup page`;</script>")
            return 200, html, SHELL.format(head="", scripts=popups).encode()
        if path == "/latin":  # its charset named only in the page, as older sites do
            return 200, "text/html", ('<!doctype html><html><head><meta charset="iso-8859-1">'
                                      "<title>Café crème, a page in Latin-1</title></head><body><p>Crème brûlée"
                                      "</p></body></html>").encode("latin-1")
        if path == "/account/secret":
            return 200, "text/plain", b"members-only-token-42"
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
        if self.catch_all and not path.endswith(".js"):
            return 200, html, SHELL.format(head="", scripts=script).encode()
        return 404, html, b"<html><head><title>Not found</title></head><body>Not found</body></html>"

"""A private site on 127.0.0.1 for login tests: basic auth, a cookie login with a CSRF
token, a logout link, sessions that can expire, and a log of every request's headers."""

from __future__ import annotations

import base64
import secrets
import threading

from werkzeug.wrappers import Request, Response

from tests.loopback import Loopback

USER, PASSWORD = "ann", "s3cret-pass"

LOGIN_FORM = """<!doctype html><html><head><title>Log in</title></head><body>
<form method="{method}" action="/login/">
<input type="hidden" name="csrf" value="{csrf}">
<input name="username"><input type="password" name="password"><input type="button" name="show" value="Show">
<button name="{button}" value="1">Log in</button>
</form></body></html>"""


def page(title: str, links: list[str]) -> str:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return (f"<!doctype html><html lang=en><head><title>{title}</title>"
            f'<meta name="description" content="{title} page"></head><body><h1>{title}</h1>{anchors}'
            + "<p>words " * 60 + "</p></body></html>")


class LoginSite(Loopback):
    """``mode`` is "form" (cookie login) or "basic" (HTTP basic auth). ``session_uses``:
    a session expires after that many pages (None: never). ``form_method``: the login form's
    method ("get" reads the fields from the query). ``button``: the name of the form's submit
    button, which the site then requires, as PHP scripts checking ``isset($_POST['login'])`` do.
    ``sliding``: every page a session opens also sets a new session cookie good for ``session_uses``
    pages, the old one running out as it would have (ASP.NET's sliding expiration renews a ticket so)."""

    def __init__(self, mode: str = "form", pages: int = 6, external: str = "", session_uses: int | None = None,
                 form_method: str = "post", button: str = "", sliding: bool = False):
        self.mode, self.pages, self.external, self.session_uses = mode, pages, external, session_uses
        self.form_method, self.button, self.sliding = form_method, button, sliding
        self.log: list[tuple[str, str, dict[str, str]]] = []  # (method, path, headers)
        self.sessions: dict[str, int] = {}
        self.logins = 0
        self._lock = threading.Lock()
        super().__init__(self.handle)

    def paths(self) -> list[str]:
        return [f"/account/{n}/" for n in range(self.pages)]

    def handle(self, request: Request) -> Response:
        with self._lock:
            self.log.append((request.method, request.full_path.rstrip("?"), dict(request.headers)))
        if request.path == "/robots.txt":
            return Response("User-agent: *\nAllow: /\n", content_type="text/plain")
        if self.mode == "basic":
            return self._basic(request)
        if request.path == "/login/":
            return self._login(request)
        if request.path == "/logout/":
            response = Response(page("Logged out", []), content_type="text/html")
            token = request.cookies.get("sessionid")
            with self._lock:
                self.sessions.pop(token, None)
            response.delete_cookie("sessionid")
            return response
        token = request.cookies.get("sessionid")
        with self._lock:
            uses = self.sessions.get(token)
            if uses is not None and self.session_uses is not None:
                if uses <= 0:
                    self.sessions.pop(token)
                    uses = None
                else:
                    self.sessions[token] = uses - 1
        if uses is None:
            return Response("", status=302, headers={"Location": f"/login/?next={request.path}"})
        response = self._page(request.path)
        if self.sliding:
            response.set_cookie("sessionid", self._new_session(), httponly=True)
        return response

    def _new_session(self) -> str:
        token = secrets.token_hex(8)
        with self._lock:
            self.sessions[token] = self.session_uses if self.session_uses is not None else 1
        return token

    def _page(self, path: str) -> Response:
        links = [*self.paths(), "/logout/"] + ([self.external] if self.external else [])
        if path in ("/", *self.paths()):
            return Response(page(f"Members {path}", links), content_type="text/html")
        return Response("not here", status=404, content_type="text/html")

    def _basic(self, request: Request) -> Response:
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if request.headers.get("Authorization") != expected:
            return Response("auth required", status=401, headers={"WWW-Authenticate": 'Basic realm="staging"'})
        return self._page(request.path)

    def _login(self, request: Request) -> Response:
        form = request.args if self.form_method == "get" else request.form
        if request.method == "GET" and "username" not in form:
            csrf = secrets.token_hex(8)
            response = Response(self._form(csrf), content_type="text/html")
            response.set_cookie("csrftoken", csrf, expires="Wed, 21 Oct 2037 07:28:00 GMT")
            return response
        if (request.method != self.form_method.upper() or form.get("csrf") != request.cookies.get("csrftoken")
                or form.get("username") != USER or form.get("password") != PASSWORD or "show" in form
                or (self.button and form.get(self.button) != "1")):
            return Response(self._form("x") + "Wrong user name or password", content_type="text/html")
        with self._lock:
            self.logins += 1
        response = Response("", status=302, headers={"Location": "/"})
        response.set_cookie("sessionid", self._new_session(), httponly=True)
        return response


    def _form(self, csrf: str) -> str:
        return LOGIN_FORM.format(method=self.form_method, csrf=csrf, button=self.button)


class RequestLog(Loopback):
    """An "external" host on 127.0.0.1 that answers 200 and records every request's headers."""

    def __init__(self):
        self.log: list[dict[str, str]] = []
        super().__init__(self.handle)

    def handle(self, request: Request) -> Response:
        self.log.append(dict(request.headers))
        return Response("ok", content_type="text/plain")

"""What `make serve` starts (manage.py serve: gunicorn, WhiteNoise, the worker cluster) serves for real.

Each server here runs on its own temporary SQLite database (SITEWARD_VAR_DIR), so
these tests open no test database and run the same on both CI databases. The HTTP
requests speak for a TLS-terminating reverse proxy on the same machine: they come
from 127.0.0.1 with ``X-Forwarded-Proto: https``, as nginx's would.
"""

from __future__ import annotations

import gzip
import http.client
import os
import re
import signal
import sqlite3
import subprocess
import time
import urllib.parse
from contextlib import closing
from http.cookies import SimpleCookie
from pathlib import Path

import brotli
import psutil
import pytest

from .conftest import MANAGE, ROOT, free_port

SECRET_KEY = "serve-smoke-test-key-" + "0123456789abcdef" * 4
USERNAME, PASSWORD = "smoke", "smoke-pass-4821"


def serve_env(var_dir: Path, **extra) -> dict:
    """A production-like environment on a SQLite file of its own: none of the suite's settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "SECURE_", "SITEWARD_", "Q_"))
           and k not in ("DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS",
                         "TRUSTED_PROXY_COUNT", "WEB_CONCURRENCY", "WEB_THREADS", "GUNICORN_CMD_ARGS")}
    env.update(SITEWARD_VAR_DIR=str(var_dir), SECRET_KEY=SECRET_KEY, DJANGO_SETTINGS_MODULE="config.settings",
               PYTHONUNBUFFERED="1", Q_POLL="0.2", Q_WORKERS="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def manage(env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(MANAGE + list(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


class Browserless:
    """Just enough of a browser behind the proxy: cookies (Secure ones too, the proxy did TLS), redirects by hand."""

    def __init__(self, port: int, *, https: bool = True):
        self.port = port
        self.https = https
        self.cookies: dict[str, str] = {}
        self.set_cookies: list[str] = []  # every Set-Cookie header, as sent

    def request(self, method: str, path: str, *, body: dict | None = None, headers: dict | None = None,
                proxied: bool | None = None):
        proxied = self.https if proxied is None else proxied
        sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
        if proxied:
            sent["X-Forwarded-Proto"] = "https"
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        data = None
        if body is not None:
            data = urllib.parse.urlencode(body).encode()
            sent["Content-Type"] = "application/x-www-form-urlencoded"
            # What a browser sends with a form POST: the CSRF check compares it with the host.
            sent["Origin"] = f"{'https' if proxied else 'http'}://127.0.0.1:{self.port}"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            content = response.read()
        finally:
            conn.close()
        for header in response.headers.get_all("Set-Cookie") or []:
            self.set_cookies.append(header)
            for name, morsel in SimpleCookie(header).items():
                self.cookies[name] = morsel.value
        return response, content


def wait_until_serving(client: Browserless, proc: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            response, _ = client.request("GET", "/accounts/login/")
            if response.status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"serve did not answer in {timeout}s:\n{log.read_text()[-3000:]}")


def start_serve(tmp_path: Path, port: int, *args: str, **env_extra):
    """migrate, a login, then `manage.py serve` in its own session, its output in a log file."""
    env = serve_env(tmp_path, **env_extra)
    for command in (["migrate", "--noinput", "-v", "0"], ["ensure_login"]):
        result = manage({**env, "DJANGO_SUPERUSER_USERNAME": USERNAME, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
                        *command)
        assert result.returncode == 0, result.stderr
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(MANAGE + ["serve", "--port", str(port), "--workers", "1", "--threads", "2", *args],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return env, proc, log


def stop_serve(proc: subprocess.Popen) -> dict[psutil.Process, str]:
    """SIGTERM (what systemd sends) to serve alone; returns what it had started (with command lines)."""
    started = {}
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            started[child] = " ".join(child.cmdline())
        except psutil.NoSuchProcess:
            pass
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=45)
    return started


def kill_everything(proc: subprocess.Popen) -> None:
    """After a failure: nothing this test started may outlive it."""
    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for member in family:
        try:
            member.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=10)


def log_in(client: Browserless) -> str:
    """Through the real form, CSRF token and all; returns the session's Set-Cookie header."""
    response, body = client.request("GET", "/accounts/login/")
    assert response.status == 200
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', body).group(1).decode()
    response, body = client.request("POST", "/accounts/login/", body={
        "username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": token, "next": ""})
    assert response.status == 302, body[:2000]
    assert response.getheader("Location") == "/"
    session_cookie = next(header for header in client.set_cookies if header.startswith("sessionid="))
    return session_cookie


@pytest.mark.cluster
def test_serve_runs_gunicorn_with_hashed_compressed_static_files_and_the_cluster_and_stops_on_sigterm(tmp_path):
    port = free_port()
    env, proc, log = start_serve(tmp_path, port, SECURE_COOKIES=1, SECURE_PROXY_SSL_HEADER=1)
    client = Browserless(port)
    try:
        wait_until_serving(client, proc, log)

        # Plain HTTP (not through the proxy's TLS) is sent to HTTPS.
        response, _ = client.request("GET", "/accounts/login/", proxied=False)
        assert response.status == 301
        assert response.getheader("Location") == f"https://127.0.0.1:{port}/accounts/login/"

        session_cookie = log_in(client)
        assert "; Secure" in session_cookie and "HttpOnly" in session_cookie
        response, body = client.request("GET", "/")
        assert response.status == 200
        assert f"Log out {USERNAME}".encode() in body
        assert "gunicorn" in response.getheader("Server", "")
        csp = response.getheader("Content-Security-Policy")
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "'unsafe-eval'" not in csp
        assert "script-src 'self' 'unsafe-inline'" not in csp
        assert response.getheader("Strict-Transport-Security") == "max-age=31536000; includeSubDomains"

        # Static files under content-hashed names, served by WhiteNoise, gzip for those who ask.
        css = re.search(rb'href="(/static/css/siteward\.[0-9a-f]{12}\.css)"', body).group(1).decode()
        assert re.search(rb'src="/static/vendor/htmx-2\.0\.11\.min\.[0-9a-f]{12}\.js"', body)
        assert re.search(rb'src="/static/js/confirm\.[0-9a-f]{12}\.js"', body)
        original = (ROOT / "static" / "css" / "siteward.css").read_bytes()
        response, content = client.request("GET", css, headers={"Accept-Encoding": "gzip"})
        assert response.status == 200
        assert response.getheader("Content-Encoding") == "gzip"
        assert response.getheader("Cache-Control") == "max-age=315360000, public, immutable"
        assert gzip.decompress(content) == original
        response, content = client.request("GET", css, headers={"Accept-Encoding": "br, gzip"})
        assert response.getheader("Content-Encoding") == "br" and brotli.decompress(content) == original
        response, content = client.request("GET", css)
        assert response.status == 200 and response.getheader("Content-Encoding") is None and content == original
        assert (tmp_path / "staticfiles" / "staticfiles.json").exists()

        # The worker cluster beside it takes a task off the same database's ORM broker.
        result = manage(env, "shell", "-c",
                        "from django_q.tasks import async_task; async_task('math.floor', 2.5, task_name='serve-ping')")
        assert result.returncode == 0, result.stderr
        database = tmp_path / "siteward.sqlite3"
        deadline = time.monotonic() + 40
        done = False
        while time.monotonic() < deadline and not done:
            with closing(sqlite3.connect(database, timeout=20)) as db:
                done = db.execute("SELECT 1 FROM django_q_task WHERE name = 'serve-ping' AND success").fetchone()
            time.sleep(0.3)
        assert done, log.read_text()[-3000:]

        started = stop_serve(proc)
    except BaseException:
        kill_everything(proc)
        raise
    output = log.read_text()
    assert proc.returncode == 0, output[-3000:]
    assert f"Siteward is serving at http://127.0.0.1:{port}/" in output
    assert "has stopped." in output  # the cluster stopped in order, not killed
    assert "did not stop" not in output
    assert "Stopped the web server and the worker cluster." in output
    commands = list(started.values())
    assert any("gunicorn" in command for command in commands), commands
    assert any(command.endswith("manage.py qcluster") for command in commands), commands
    gone, alive = psutil.wait_procs(list(started), timeout=5)
    assert not alive, f"left running: {alive}"


def test_check_deploy_is_clean_behind_a_tls_proxy_with_secure_cookies(tmp_path):
    result = manage(serve_env(tmp_path, SECURE_COOKIES=1, SECURE_PROXY_SSL_HEADER=1),
                    "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNING" not in result.stderr


def test_check_deploy_warns_without_secure_cookies(tmp_path):
    """The clean check above is earned by the settings, not by silencing the checks."""
    result = manage(serve_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in result.stderr


def test_serve_refuses_to_start_with_debug_on(tmp_path):
    started = time.monotonic()
    result = manage(serve_env(tmp_path, DEBUG=1), "serve", "--port", str(free_port()), timeout=60)
    assert result.returncode != 0
    assert "Refusing to serve with DEBUG on" in result.stderr
    assert not (tmp_path / "staticfiles").exists()  # nothing was gathered, nothing started
    assert time.monotonic() - started < 30


@pytest.mark.browser
def test_pages_under_the_content_security_policy_load_htmx_and_ask_before_deleting(tmp_path):
    """Chromium against gunicorn: no CSP violation, htmx works, the delete button asks first."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    env, proc, log = start_serve(tmp_path, port, "--no-cluster")
    try:
        made = manage(env, "shell", "-c", (
            "from django.contrib.auth import get_user_model; from tests.factories import make_finished_audit; "
            f"audit = make_finished_audit(get_user_model().objects.get(username={USERNAME!r})); "
            "print(audit.pk, audit.site_id)"))
        assert made.returncode == 0, made.stderr
        audit_id, site_id = map(int, made.stdout.strip().splitlines()[-1].split())
        wait_until_serving(Browserless(port, https=False), proc, log)

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                                 args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(base_url=f"http://127.0.0.1:{port}")
                page.set_default_timeout(10_000)
                violations = []
                page.on("console", lambda msg: "Content Security Policy" in msg.text and violations.append(msg.text))
                page.goto("/accounts/login/")
                page.fill("#id_username", USERNAME)
                page.fill("#id_password", PASSWORD)
                page.click("button[type=submit]")
                page.wait_for_url(f"http://127.0.0.1:{port}/")

                page.goto(f"/audits/{audit_id}/")
                assert page.evaluate("window.htmx && htmx.config.includeIndicatorStyles") is False
                # htmx works: a filter on the issue table swaps the table in place.
                page.goto(f"/audits/{audit_id}/issues/")
                with page.expect_response(lambda r: "/issues/" in r.url and r.request.headers.get("hx-request")):
                    page.select_option("#f-severity", "critical")

                # The admin (its own scripts and styles, collected by collectstatic) keeps to the policy too.
                for path in ("/admin/", "/admin/audits/audit/", f"/admin/audits/audit/{audit_id}/change/",
                             "/admin/axes/accessattempt/"):
                    assert page.goto(path).status == 200, path
                    page.wait_for_load_state("load")

                page.goto(f"/audits/{audit_id}/")
                answers = iter([False, True, False])
                asked = []

                def answer(dialog):
                    asked.append(dialog.message)
                    dialog.accept() if next(answers) else dialog.dismiss()

                page.on("dialog", answer)
                page.click("#delete")
                page.wait_for_timeout(500)
                assert violations == []
                assert page.url.endswith(f"/audits/{audit_id}/")  # cancelled: still there
                with page.expect_navigation():
                    page.click("#delete")
                assert asked == ["Delete this audit and all its results?"] * 2
                assert not page.url.endswith(f"/audits/{audit_id}/")
                assert page.locator(".messages").inner_text().startswith("Deleted the audit")

                page.goto(f"/sites/{site_id}/")
                page.click("#delete-site")
                page.wait_for_timeout(500)
                assert violations == []
                assert asked[-1] == "Delete this site, its schedule and all its audits?"
                assert page.url.endswith(f"/sites/{site_id}/")
                page.reload()
                assert page.locator("#delete-site").count() == 1  # cancelled: the site is still there
                assert violations == []
            finally:
                browser.close()
        stop_serve(proc)
    except BaseException:
        kill_everything(proc)
        raise
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert "Stopped the web server." in log.read_text()

"""Headless Chromium (Debian's package, driven by Playwright) against pytest-django's live server.

Playwright's browser download is never used: the tests run the system
``/usr/bin/chromium`` through ``executable_path``. Screenshots of each screen go
to ``test-artifacts/screenshots/`` so a person can look at what the tests saw.
"""

import re
from pathlib import Path

import pytest
from django.db import connections

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
PASSWORD = "owner-pass-123"  # the password tests/conftest.py gives the "owner" fixture


@pytest.fixture
def chromium(monkeypatch):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop running on this thread while it
    # is started; the ORM calls the tests make between browser steps are ordinary
    # blocking calls, not async code. Function scope: the loop (and this setting)
    # must be gone before other tests, which call asyncio.run(), run on this thread.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        # ORM calls a test made while Playwright's loop ran on this thread opened
        # a connection Django keeps apart from the thread's usual one; pytest-django
        # never sees it, and on PostgreSQL it would hold the test database open.
        connections.close_all()
        browser.close()


@pytest.fixture
def page(chromium, live_server):
    context = chromium.new_context(base_url=live_server.url, accept_downloads=True,
                                   viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    yield tab
    context.close()


def shot(page, name: str) -> Path:
    """Save a full-page screenshot named for the screen."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^a-z0-9_-]+', '-', name.lower())}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def log_in(page, username="owner", password=PASSWORD):
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))

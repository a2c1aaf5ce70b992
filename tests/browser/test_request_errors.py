"""An htmx request that fails says so (static/js/request_errors.js) instead of doing nothing visible."""

import re

import pytest
from playwright.sync_api import expect

from audits.models import Audit, Issue
from tests.factories import make_finished_audit

from .conftest import PASSWORD, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set on window before an htmx click; still there afterwards only if the page was not reloaded.
MARK = "window.__sitewardNoReload = true"
STILL_MARKED = "window.__sitewardNoReload === true"


def open_issues(page, audit):
    log_in(page)
    page.goto(f"/audits/{audit.pk}/issues/?review=open")
    expect(page.locator("tr.issue")).to_have_count(5)
    page.evaluate(MARK)


def csrf_cookie(page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")


def ignore_first_row(page):
    page.locator("tr.issue input[name=issue]").first.check()
    page.click("#mark-ignored")


def test_a_triage_click_after_the_csrf_token_rotated_reloads_the_page_and_says_to_do_it_again(page, owner):
    audit = make_finished_audit(owner)
    open_issues(page, audit)
    # Logging in again in another tab rotates the CSRF token this page holds.
    before = csrf_cookie(page)
    other = page.context.new_page()
    other.goto("/accounts/login/")
    other.fill("#id_username", "owner")
    other.fill("#id_password", PASSWORD)
    with other.expect_navigation():
        other.click("main button[type=submit]")
    other.close()
    assert csrf_cookie(page) != before

    ignore_first_row(page)
    expect(page.locator("#request-error")).to_contain_text("This page was out of date")
    expect(page.locator("#request-error")).to_contain_text("nothing was changed: please do that again")
    assert not page.evaluate(STILL_MARKED)  # reloaded, with the fresh token
    assert not Issue.objects.filter(audit=audit, review="ignored").exists()
    shot(page, "request-error-403")

    ignore_first_row(page)
    expect(page.locator("#triage-result")).to_have_text("Marked 1 issue ignored.")
    page.click("#request-error button")
    expect(page.locator("#request-error")).to_have_count(0)


def test_a_server_error_says_nothing_was_changed_and_keeps_the_page(page, owner):
    audit = make_finished_audit(owner)
    open_issues(page, audit)
    page.route(re.compile(r".*/issues/review/.*"),
               lambda route: route.fulfill(status=500, content_type="text/html", body="<h1>Server Error (500)</h1>"))
    ignore_first_row(page)
    expect(page.locator("#request-error")).to_contain_text("The server failed to do that (error 500)")
    assert page.evaluate(STILL_MARKED)  # no reload: a retry may work
    expect(page.locator("tr.issue")).to_have_count(5)


def test_a_request_that_never_reaches_the_server_says_so(page, owner):
    audit = make_finished_audit(owner)
    open_issues(page, audit)
    page.route(re.compile(r".*/issues/\?.*severity=critical.*"), lambda route: route.abort())
    page.select_option("#f-severity", "critical")
    expect(page.locator("#request-error")).to_contain_text("The server could not be reached")
    assert page.evaluate(STILL_MARKED)


def test_a_filter_on_an_audit_deleted_meanwhile_reloads_to_the_not_found_page(page, owner):
    audit = make_finished_audit(owner)
    open_issues(page, audit)
    Audit.objects.filter(pk=audit.pk).delete()
    with page.expect_navigation():
        page.select_option("#f-severity", "critical")
    expect(page.locator("body")).to_contain_text("Not Found")
    assert not page.evaluate("window.__sitewardNoReload === true")


def test_a_refusal_that_outlives_the_reload_reloads_only_once(page, owner):
    audit = make_finished_audit(owner)
    open_issues(page, audit)
    page.route(re.compile(r".*/issues/review/.*"), lambda route: route.fulfill(status=403, body="Forbidden"))
    ignore_first_row(page)
    expect(page.locator("#request-error")).to_contain_text("This page was out of date")
    page.evaluate(MARK)
    ignore_first_row(page)
    expect(page.locator("#request-error")).to_contain_text("Reloading did not help")
    assert page.evaluate(STILL_MARKED)

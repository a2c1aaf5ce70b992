"""The dashboard in a real browser, on rows built directly (no crawl needed)."""

import csv
import io
import re
import time

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from audits.models import Audit
from tests.factories import SITE, make_finished_audit, make_issue, make_link, make_page

from .conftest import log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_person_logs_in_and_sees_their_audits(page, owner):
    make_finished_audit(owner)
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    shot(page, "01-login")
    log_in(page)
    expect(page.locator("#audit-list")).to_contain_text("https://shop.example/")
    expect(page.locator("#audit-list")).to_contain_text("Completed")
    shot(page, "02-audit-list")


def test_a_bad_url_gets_its_message_next_to_the_field(page, owner):
    log_in(page)
    page.click("#new-audit")
    page.fill("#id_start_url", "ftp://files.example/")
    page.click("button:has-text('Start audit')")
    expect(page.locator("#id_start_url_error")).to_contain_text("Only http:// and https://")
    page.fill("#id_start_url", "http://127.0.0.1:8000/")
    page.fill("#id_include_patterns", "blog/(oops")
    page.click("button:has-text('Start audit')")
    expect(page.locator("#id_start_url_error")).to_contain_text("SITEWARD_ALLOW_PRIVATE")
    expect(page.locator("#id_include_patterns_error")).to_contain_text("blog/(oops")
    shot(page, "03-new-audit-errors")
    assert Audit.objects.count() == 0


def test_a_completed_audit_shows_summary_charts_tables_and_csvs(page, owner):
    audit = make_finished_audit(owner)
    log_in(page)
    page.goto(audit.get_absolute_url())
    expect(page.locator("#audit-status")).to_have_text("Completed")
    expect(page.locator("#summary")).to_contain_text("Broken internal link")
    expect(page.locator("#chart-status rect")).to_have_count(5)
    shot(page, "04-audit-completed")

    # Issues, filtered over htmx without a full reload.
    page.click("#link-issues")
    expect(page.locator("tr.issue")).to_have_count(5)
    page.select_option("#f-severity", "critical")
    expect(page.locator("tr.issue")).to_have_count(3)
    expect(page).to_have_url(re.compile(r"severity=critical"))
    # Sorting swaps the table; a later filter change keeps that sort.
    page.click("th a:has-text('Page')")
    expect(page).to_have_url(re.compile(r"sort=url"))
    page.select_option("#f-severity", "")
    expect(page.locator("tr.issue")).to_have_count(5)
    expect(page).to_have_url(re.compile(r"sort=url"))
    page.select_option("#f-severity", "critical")
    expect(page.locator("tr.issue")).to_have_count(3)
    shot(page, "05-issues-filtered")

    # A broken page's own view shows where the links to it are.
    page.locator("tr.issue[data-code='http_4xx'] td.url a").first.click()
    expect(page.locator("#inlinks")).to_contain_text("Gone away")
    expect(page.locator("#inlinks")).to_contain_text("Old link")
    shot(page, "06-page-detail")

    page.goto(f"/audits/{audit.pk}/pages/")
    page.select_option("#f-status", "4xx")
    expect(page.locator("tr.page-row")).to_have_count(1)
    shot(page, "07-pages-filtered")

    page.goto(audit.get_absolute_url())
    for link, first_column, rows in (("#csv-pages", "url", 7), ("#csv-issues", "severity", 5),
                                     ("#csv-links", "source_url", 5)):
        with page.expect_download() as info:
            page.click(link)
        text = open(info.value.path(), encoding="utf-8-sig").read()
        parsed = list(csv.reader(io.StringIO(text, newline="")))
        assert parsed[0][0] == first_column and len(parsed) == 1 + rows


def test_a_failed_audit_shows_its_reason_and_partial_results(page, owner):
    audit = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="site_unavailable",
                                error_detail="The start page answered 503 five times", failed_phase="crawling")
    log_in(page)
    page.goto(audit.get_absolute_url())
    banner = page.locator("#failure-banner")
    expect(banner).to_contain_text("stopped early after 7 pages")
    expect(banner).to_contain_text("The start page never answered successfully")
    expect(banner).to_contain_text("The start page answered 503 five times")
    expect(banner).to_contain_text("site_unavailable")
    expect(banner.locator("#resume")).to_be_visible()
    expect(banner.locator("#rerun")).to_be_visible()
    expect(page.locator("#summary")).to_contain_text("Page returns 4xx")
    shot(page, "08-audit-failed")
    banner.locator("#resume").click()
    expect(page.locator("#audit-status")).to_have_text("Queued")


def test_the_progress_panel_updates_and_stops_polling_when_the_audit_ends(page, owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    Audit.objects.filter(pk=audit.pk).update(pages_crawled=3, pages_discovered=20, finished_at=None)
    progress_requests = []
    page.on("request", lambda request: "/progress/" in request.url and progress_requests.append(time.monotonic()))
    log_in(page)
    page.goto(audit.get_absolute_url())
    expect(page.locator("#pages-crawled")).to_contain_text("3 of 20")
    shot(page, "09-audit-running")

    Audit.objects.filter(pk=audit.pk).update(pages_crawled=12, pages_discovered=25)
    make_page(audit, f"{SITE}/fresh-from-the-crawl", title="Fresh")
    expect(page.locator("#pages-crawled")).to_contain_text("12 of 25", timeout=6000)
    expect(page.locator("#latest-pages")).to_contain_text("fresh-from-the-crawl")

    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE,
                                             finished_at=timezone.now())
    expect(page.locator("#audit-status")).to_have_text("Completed", timeout=6000)
    seen = len(progress_requests)
    page.wait_for_timeout(3000)  # more than one 2 s polling interval
    assert len(progress_requests) == seen, "polling continued after the audit ended"
    shot(page, "10-audit-finished-live")


def test_injected_htmx_attributes_in_crawled_text_fire_no_request(page, owner):
    audit = make_finished_audit(owner)
    hostile = f'<b hx-get="/audits/{audit.pk}/delete/" hx-trigger="load">x</b>'
    evil = make_page(audit, f"{SITE}/evil", title=hostile, description=hostile)
    make_issue(audit, "title_length", evil.url, page=evil, message=hostile, target_url="javascript:alert(1)")
    make_link(audit, evil.url, "javascript:alert(2)", anchor=hostile)
    fired = []
    page.on("request", lambda request: "/delete/" in request.url and fired.append(request.url))
    log_in(page)
    for path in (f"/audits/{audit.pk}/pages/{evil.pk}/", f"/audits/{audit.pk}/issues/", f"/audits/{audit.pk}/pages/"):
        page.goto(path)
        page.wait_for_timeout(300)
    expect(page.locator("tr.page-row", has_text="hx-get=")).to_have_count(1)  # shown as text
    shot(page, "14-hostile-text-as-text")
    assert fired == [] and Audit.objects.filter(pk=audit.pk).exists()
    assert page.locator("a[href^='javascript:']").count() == 0


def test_a_flash_message_is_not_shown_again_on_back(page, owner):
    audit = make_finished_audit(owner)
    log_in(page)
    # The issue table's "ignore this type on URLs like this" fills the rule form in.
    page.goto(f"/audits/{audit.pk}/issues/?rule_code=title_length&rule_pattern=%5Ehttps%3A%2F%2Fshop%5C.example%2F")
    page.click("#add-ignore-rule")
    expect(page.locator(".messages")).to_contain_text("Rule added for the site")
    page.select_option("#f-severity", "critical")  # an htmx swap that pushes a URL: htmx keeps a copy
    expect(page).to_have_url(re.compile(r"severity=critical"))
    page.go_back()
    expect(page).not_to_have_url(re.compile(r"severity=critical"))
    expect(page.locator("#issue-table")).to_be_visible()
    expect(page.locator(".messages")).to_have_count(0)


def test_cancel_asks_first_and_then_says_who_cancelled(page, owner):
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    Audit.objects.filter(pk=audit.pk).update(finished_at=None)
    log_in(page)
    page.goto(audit.get_absolute_url())
    questions = []

    def answer(dialog, accept):
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, False))
    page.click("#cancel")
    page.wait_for_timeout(300)
    assert questions and "Cancel this audit?" in questions[0]
    audit.refresh_from_db()
    assert audit.status == Audit.Status.RUNNING

    page.once("dialog", lambda dialog: answer(dialog, True))
    page.click("#cancel")
    expect(page.locator("#stop-note")).to_contain_text(re.compile(
        r"^Cancelled by owner at \d\d:\d\d; everything crawled before is kept\.$"))
    expect(page.locator("#phase")).to_have_text("Cancelled while crawling")
    expect(page.locator(".messages")).to_have_count(0)
    shot(page, "14-audit-cancelled")

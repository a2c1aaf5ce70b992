"""Triage in a real browser: choose rows, mark them ignored, watch the totals drop; rules; the type filter."""

import re

import pytest
from playwright.sync_api import expect

from audits.models import IgnoreRule, Issue
from tests.factories import make_finished_audit

from .conftest import log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set on window before an htmx click; still there afterwards only if the page was not reloaded.
MARK = "window.__sitewardNoReload = true"
STILL_MARKED = "window.__sitewardNoReload === true"


def test_choosing_rows_and_ignoring_them_swaps_the_table_and_drops_the_totals(page, owner):
    audit = make_finished_audit(owner)
    log_in(page)
    page.goto(audit.get_absolute_url())
    expect(page.locator("#severity-counts")).to_contain_text("3 critical")
    expect(page.locator("#ignored-count")).to_have_count(0)

    page.goto(f"/audits/{audit.pk}/issues/?review=open")
    expect(page.locator("tr.issue")).to_have_count(5)
    page.evaluate(MARK)
    for row in page.locator("tr.issue[data-code=broken_link_internal]").all():
        row.locator("input[name=issue]").check()
    page.click("#mark-ignored")
    expect(page.locator("#triage-result")).to_have_text("Marked 2 issues ignored.")
    # Swapped in place under the same filter: the two ignored rows are gone from the open ones.
    expect(page.locator("tr.issue")).to_have_count(3)
    assert page.evaluate(STILL_MARKED)
    assert Issue.objects.filter(audit=audit, review="ignored").count() == 2
    shot(page, "triage-marked")

    page.goto(audit.get_absolute_url())
    expect(page.locator("#severity-counts")).to_contain_text("1 critical")
    page.click("#ignored-count a")
    expect(page).to_have_url(re.compile(r"review=ignored"))
    expect(page.locator("tr.issue")).to_have_count(2)

    # "All rows on this page" ticks every row; "Open again" brings them back.
    page.check("#choose-page")
    expect(page.locator("input[name=issue]:checked")).to_have_count(2)
    page.click("#mark-open")
    expect(page.locator("#triage-result")).to_have_text("Marked 2 issues open again.")
    expect(page.locator("#no-issues")).to_be_visible()


def test_all_matching_the_filter_marks_every_page_of_it(page, owner):
    audit = make_finished_audit(owner)
    log_in(page)
    page.goto(f"/audits/{audit.pk}/issues/")
    page.select_option("#f-severity", "critical")
    expect(page.locator("tr.issue")).to_have_count(3)
    expect(page).to_have_url(re.compile(r"severity=critical"))
    page.check("#choose-all-matching")
    # Sorting the table meanwhile asks nothing (its links sit inside the triage form).
    sorting = []

    def asked_to_sort(dialog):
        sorting.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", asked_to_sort)
    page.click("thead a:has-text('Page')")
    expect(page).to_have_url(re.compile(r"sort="))
    # The sorted table is swapped in with its box cleared (the URL may change before the swap).
    expect(page.locator("#choose-all-matching")).not_to_be_checked()
    page.remove_listener("dialog", asked_to_sort)
    assert not sorting
    page.check("#choose-all-matching")
    # Rows on other pages are marked too: asked first, and a "no" sends nothing.
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#mark-reviewed")
    expect(page.locator("#choose-all-matching")).to_be_checked()
    assert asked and "3 issues matching this filter, on every page" in asked[0] and "reviewed" in asked[0]
    assert not Issue.objects.filter(audit=audit, review="reviewed").exists()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#mark-reviewed")
    expect(page.locator("#triage-result")).to_have_text("Marked 3 issues reviewed.")
    assert set(Issue.objects.filter(audit=audit, review="reviewed").values_list("severity", flat=True)) == {
        "critical"}


def test_the_type_filter_offers_only_the_types_found_and_filters_by_one(page, owner):
    audit = make_finished_audit(owner)
    log_in(page)
    page.goto(f"/audits/{audit.pk}/issues/")
    options = page.locator("#f-code option").all_inner_texts()
    assert options == ["Any", "Broken internal link", "Meta description missing", "Page returns 4xx",
                       "Title too short or too long"]
    page.select_option("#f-code", "broken_link_internal")
    expect(page.locator("tr.issue")).to_have_count(2)
    expect(page).to_have_url(re.compile(r"code=broken_link_internal"))


def test_a_rule_added_on_the_site_page_and_one_offered_from_the_table(page, owner):
    audit = make_finished_audit(owner)
    log_in(page)
    page.goto(audit.site.get_absolute_url())
    expect(page.locator("#no-rules")).to_be_visible()
    page.select_option("#rule-form select[name=code]", "broken_link_internal")
    page.fill("#rule-form input[name=pattern]", "(a)\\1")
    page.click("#add-rule")
    expect(page.locator("#field-pattern")).to_contain_text("RE2")
    page.fill("#rule-form input[name=pattern]", "/about$")
    page.click("#add-rule")
    expect(page.locator("#rule-list")).to_contain_text("/about$")
    expect(page.locator(".messages")).to_contain_text("Rule added: 1 issue ignored")
    shot(page, "site-ignore-rules")

    # From the table: a row's offer fills the rule form in with its type and folder.
    page.goto(f"/audits/{audit.pk}/issues/?code=title_length")
    page.click("tr.issue a.ignore-like")
    expect(page.locator("#ignore-rule")).to_have_attribute("open", "")
    expect(page.locator("#ignore-rule-form input[name=pattern]")).to_have_value(r"^https://shop\.example/")
    page.click("#add-ignore-rule")
    expect(page.locator(".messages")).to_contain_text("1 issue of this audit ignored")
    expect(page).to_have_url(re.compile(r"code=title_length$"))
    assert IgnoreRule.objects.filter(site=audit.site).count() == 2
    assert set(Issue.objects.filter(audit=audit, review="ignored").values_list("code", flat=True)) == {
        "broken_link_internal", "title_length"}


def test_a_rule_added_after_an_htmx_filter_change_returns_to_the_new_filters(page, owner):
    audit = make_finished_audit(owner)
    log_in(page)
    page.goto(f"/audits/{audit.pk}/issues/?severity=warning")
    page.select_option("#f-severity", "notice")
    expect(page).to_have_url(re.compile(r"severity=notice"))
    page.click("#ignore-rule summary")
    page.select_option("#ignore-rule-form select[name=code]", "title_length")
    page.fill("#ignore-rule-form input[name=pattern]", "/about$")
    page.click("#add-ignore-rule")
    expect(page.locator(".messages")).to_contain_text("Rule added for the site")
    # The list as htmx last showed it (its filter form's whole query), not as the page first opened.
    expect(page).to_have_url(re.compile(r"[?&]severity=notice(&|$)"))
    expect(page.locator("#f-severity")).to_have_value("notice")

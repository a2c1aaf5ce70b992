"""Broken links by target in a real browser: the table, its filter, and a row expanded to all its sources."""

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from tests.dashboard.broken_data import DEAD, GONE, SOURCES, add_sources, make_broken_audit

from .conftest import log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_person_finds_the_dead_targets_and_every_page_linking_to_one(page, owner):
    audit = make_broken_audit(owner)
    log_in(page)
    page.goto(f"/audits/{audit.pk}/issues/")
    page.click("#nav-broken")
    expect(page).to_have_url(re.compile(rf"/audits/{audit.pk}/broken/$"))
    rows = page.locator("tr.broken-target")
    expect(rows).to_have_count(3)
    first = rows.first
    expect(first.locator("td.url")).to_have_text(GONE)
    expect(first.locator("td.linking-pages")).to_contain_text("4")
    expect(first.locator(".sources-preview li")).to_have_count(3)
    shot(page, "20-broken-links")

    # Expanding the row loads every source into it, without leaving the page.
    first.locator("details.more-sources summary").click()
    listed = first.locator("details.more-sources .source-list li")
    expect(listed).to_have_count(4)
    for url in SOURCES[:4]:
        expect(first.locator("details.more-sources .source-list")).to_contain_text(url)
    expect(page).to_have_url(re.compile(rf"/audits/{audit.pk}/broken/$"))
    shot(page, "21-broken-links-expanded")

    # The filter swaps the table: external targets only.
    page.select_option("#f-scope", "external")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("td.url")).to_have_text(DEAD)
    expect(page).to_have_url(re.compile(r"scope=external"))


def test_the_expanded_list_of_a_much_linked_target_pages_in_place(page, owner):
    audit = make_broken_audit(owner)
    add_sources(audit, GONE, 150)
    log_in(page)
    page.goto(f"/audits/{audit.pk}/broken/")
    row = page.locator("tr.broken-target").first
    row.locator("details.more-sources summary").click()
    listed = row.locator(".source-list li")
    expect(listed).to_have_count(100)
    row.locator(".sources a[rel=next]").click()
    expect(listed).to_have_count(54)
    expect(row.locator(".source-list")).to_contain_text(SOURCES[3])
    expect(page).to_have_url(re.compile(rf"/audits/{audit.pk}/broken/$"))


def serious_violations(page) -> list[str]:
    return [f"{v['impact']} {v['id']}: {[n['target'] for n in v['nodes']]}"
            for v in Axe().run(page).response["violations"] if v["impact"] in ("serious", "critical")]


def test_the_broken_links_screens_pass_axe_and_fit_a_phone(page, owner):
    audit = make_broken_audit(owner)
    long_target = f"{GONE}/" + "-".join(["a-long-unbroken-path-segment"] * 6)
    add_sources(audit, long_target, 5)
    log_in(page)
    page.goto(f"/audits/{audit.pk}/broken/")
    page.locator("tr.broken-target").first.locator("details.more-sources summary").click()
    expect(page.locator("tr.broken-target").first.locator(".source-list li").first).to_be_visible()
    for path in (None, f"/audits/{audit.pk}/broken/sources/?target={GONE}"):
        if path:
            page.goto(path)
        page.set_viewport_size({"width": 1280, "height": 900})
        assert serious_violations(page) == []
        page.set_viewport_size({"width": 390, "height": 844})
        assert serious_violations(page) == []
        width, viewport = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width <= viewport, f"{page.url}: {width} px wide at 390 px"

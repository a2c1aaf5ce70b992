"""Every screen, in a real browser: no serious or critical axe-core violations, and no sideways scroll at 390 px.

One test walks all the screens in one logged-in tab and collects every failure, so a
single run reports them all and the browser starts once. The screens are plain
lists of ``Screen(name, url)`` (plus an optional step run after the page loads):
a new screen is one more line in the list its data belongs to.

axe runs at desktop width, then the same page is narrowed to a phone's 390x844
viewport, where axe runs again (tables become scrolling boxes there) and the page
is measured, so each screen loads once. axe's script comes from the installed
axe-playwright-python package, not the network.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone
from playwright.sync_api import expect

from audits import diff
from audits.models import Audit, Issue
from tests.factories import SITE, make_audit, make_finished_audit, make_issue, make_link, make_page

from .conftest import PASSWORD, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
BLOCKING_IMPACTS = {"serious", "critical"}

# Long enough that a table cell, a heading or a fact list would push a 390 px page
# sideways unless it wraps.
LONG_URL = f"{SITE}/catalogue/" + "/".join(["an-unbroken-path-segment-that-goes-on-and-on"] * 3) \
    + "?utm_source=newsletter&utm_medium=email&utm_campaign=spring-sale-2024-final-final"


@dataclass(frozen=True)
class Screen:
    name: str
    url: Callable[[dict], str]  # the rows built for the walk -> the path to open
    then: Callable | None = None  # optional step after the page loads, e.g. submitting a form


def submit_wrong_password(page):
    page.fill("#id_username", "owner")
    page.fill("#id_password", "not-the-password")
    page.click("button[type=submit]")
    page.wait_for_selector(".error")


def submit_bad_audit(page):
    page.fill("#id_start_url", "ftp://files.example/")
    page.fill("#id_include_patterns", "blog/(oops")
    page.click("button:has-text('Start audit')")
    page.wait_for_selector("#field-start_url.has-error")


def hold_progress_still(page):
    """Refuse the running audit's 2 s progress polls, so no swap lands while axe reads the page."""
    page.route("**/progress/", lambda route: route.abort())


# Before logging in.
ANONYMOUS_SCREENS = [
    Screen("login", lambda d: "/accounts/login/"),
    Screen("login with error", lambda d: "/accounts/login/", submit_wrong_password),
]

# Logged in, before any audit exists.
EMPTY_SCREENS = [
    Screen("audit list (empty)", lambda d: "/"),
    Screen("sites list (empty)", lambda d: "/sites/"),
    Screen("new audit form", lambda d: "/audits/new/"),
    Screen("new audit form with errors", lambda d: "/audits/new/", submit_bad_audit),
]

# Logged in, with the rows ``build_audits`` makes.
SCREENS = [
    Screen("audit list", lambda d: "/"),
    Screen("audit running", lambda d: d["running"].get_absolute_url(), hold_progress_still),
    Screen("audit completed", lambda d: d["completed"].get_absolute_url()),
    Screen("audit failed", lambda d: d["failed"].get_absolute_url()),
    Screen("audit cancelled", lambda d: d["cancelled"].get_absolute_url()),
    Screen("issues table", lambda d: f"/audits/{d['completed'].pk}/issues/"),
    Screen("pages table", lambda d: f"/audits/{d['completed'].pk}/pages/"),
    Screen("broken links by target", lambda d: f"/audits/{d['completed'].pk}/broken/"),
    Screen("page detail", lambda d: f"/audits/{d['completed'].pk}/pages/{d['long_page'].pk}/"),
    Screen("validation checklist", lambda d: d["validation"].get_absolute_url()),
    Screen("compare", lambda d: f"/audits/{d['completed'].pk}/compare/{d['baseline'].pk}/"),
    Screen("sites list", lambda d: "/sites/"),
    Screen("site detail", lambda d: d["completed"].site.get_absolute_url()),
    Screen("site access", lambda d: f"/sites/{d['completed'].site_id}/access/"),
]


def build_audits(owner) -> dict:
    """A baseline and a later completed audit of one site (diffed), plus running, failed and cancelled ones.

    The completed audit has a page, issue and link with a very long URL, and the
    failed one a very long start URL, so headings and cells must wrap at 390 px.
    """
    baseline = make_finished_audit(owner)
    make_page(baseline, f"{SITE}/retired", title="Retired page", depth=1)
    completed = make_finished_audit(owner)
    Issue.objects.filter(audit=completed, code="broken_link_internal", url=f"{SITE}/about").delete()
    long_page = make_page(completed, LONG_URL, title="A page with a long address", depth=2, inlinks=1,
                          redirect_chain=[[LONG_URL + "&old=1", 301, LONG_URL]])
    make_link(completed, f"{SITE}/", LONG_URL, anchor="Spring sale")
    make_issue(completed, "meta_description_missing", LONG_URL, page=long_page)
    make_issue(completed, "broken_link_internal", LONG_URL, page=long_page, target_url=LONG_URL + "#gone")
    diff.record(completed)

    # A re-check of the baseline: its checklist of still there, unknown and fixed issues.
    validation = make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=baseline, baseline=baseline)
    Issue.objects.filter(audit=validation, code="broken_link_internal").delete()
    diff.record(validation)

    running = make_finished_audit(owner, status=Audit.Status.RUNNING)
    Audit.objects.filter(pk=running.pk).update(pages_crawled=3, pages_discovered=20, finished_at=None)
    failed = make_finished_audit(owner, status=Audit.Status.FAILED, start_url=LONG_URL,
                                 error_code="site_unavailable", failed_phase="crawling",
                                 error_detail="The start page answered 503 five times")
    cancelled = make_audit(owner, status=Audit.Status.CANCELLED, phase=Audit.Phase.CRAWLING,
                           error_code="cancelled", origin=SITE, started_at=timezone.now(),
                           finished_at=timezone.now())
    return {"baseline": baseline, "completed": completed, "long_page": long_page, "running": running,
            "failed": failed, "cancelled": cancelled, "validation": validation}


def serious_violations(page) -> list[str]:
    """axe-core's serious and critical violations on the current page, one line each with the nodes' targets."""
    found = []
    for violation in Axe().run(page).response["violations"]:
        if violation["impact"] in BLOCKING_IMPACTS:
            targets = [" ".join(map(str, node["target"])) for node in violation["nodes"]]
            found.append(f"{violation['impact']} {violation['id']}: {targets}")
    return found


# aria-describedby pointing at an id that is not on the page is silently ignored by screen readers
# (axe only flags it for review), so the walk checks every reference itself.
DANGLING_REFERENCES = """() => [...document.querySelectorAll("[aria-describedby], [aria-labelledby]")].flatMap(el =>
    ["aria-describedby", "aria-labelledby"].flatMap(attr => (el.getAttribute(attr) || "").split(/\\s+/)
        .filter(id => id && !document.getElementById(id)).map(id => `${el.id || el.tagName} ${attr}=${id}`)))"""


def check_screens(page, screens, data, failures):
    """Open each screen, run axe at desktop width, then measure it at 390 px; append failures."""
    for screen in screens:
        page.set_viewport_size(DESKTOP)
        response = page.goto(screen.url(data))
        assert response.ok, f"{screen.name}: {screen.url(data)} answered {response.status}"
        if screen.then:
            screen.then(page)
        failures += [f"{screen.name}: {line}" for line in serious_violations(page)]
        failures += [f"{screen.name}: missing id in {ref}" for ref in page.evaluate(DANGLING_REFERENCES)]

        page.set_viewport_size(PHONE)
        # Again on the phone layout, where tables become scrolling boxes; only what is new.
        failures += [f"{screen.name} at 390 px: {line}" for line in serious_violations(page)
                     if f"{screen.name}: {line}" not in failures]
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        if widths[0] > widths[1]:
            failures.append(f"{screen.name}: {widths[0]} px wide in a {widths[1]} px viewport")
        shot(page, f"390-{screen.name}")
        page.unroute_all()


def test_every_screen_has_no_serious_axe_violations_and_no_sideways_scroll_on_a_phone(page, owner):
    failures: list[str] = []
    check_screens(page, ANONYMOUS_SCREENS, {}, failures)
    log_in(page, "owner", PASSWORD)
    check_screens(page, EMPTY_SCREENS, {}, failures)
    check_screens(page, SCREENS, build_audits(owner), failures)
    assert not failures, "\n".join(failures)


def test_the_first_tab_stop_is_a_skip_link_shown_on_focus_that_jumps_to_the_content(page, owner):
    log_in(page)
    page.goto("/sites/")
    skip = page.locator("a.skip-link")
    assert skip.bounding_box()["y"] + skip.bounding_box()["height"] <= 0, "the skip link shows before focus"
    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    expect(skip).to_have_text("Skip to content")
    assert skip.bounding_box()["y"] >= 0, "the focused skip link is off-screen"
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#content$"))
    # The next tab stop is inside <main>, past the navigation.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('main#content') !== null")


def test_a_screen_reader_hears_each_form_error_on_the_field_it_belongs_to(page, owner):
    page.goto("/accounts/login/")
    submit_wrong_password(page)
    for field in ("#id_username", "#id_password"):
        expect(page.locator(field)).to_have_accessible_description(re.compile("didn't match"))
        expect(page.locator(field)).to_have_attribute("aria-invalid", "true")

    log_in(page)
    page.goto("/audits/new/")
    submit_bad_audit(page)
    expect(page.locator("#id_start_url")).to_have_accessible_description(re.compile("Only http:// and https://"))
    expect(page.locator("#id_start_url")).to_have_attribute("aria-invalid", "true")
    # Help text and error together, as Django orders them: help first.
    expect(page.locator("#id_include_patterns")).to_have_accessible_description(
        re.compile(r"only matching URLs are crawled.*blog/\(oops"))
    # A field without an error is described by its help text only.
    expect(page.locator("#id_concurrency")).to_have_accessible_description(re.compile("^Requests in flight"))

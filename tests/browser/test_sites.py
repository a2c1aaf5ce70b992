"""Sites in a real browser: trend chart, schedule form, the compare view and the change filter."""

import re

import pytest
from django_q.models import Schedule
from playwright.sync_api import expect

from audits import diff
from audits.models import Audit, Issue, LinkEdge, Site
from tests.factories import SITE, make_audit, make_finished_audit, make_issue, make_page

from .conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Set on window before an htmx click; still there afterwards only if the page was not reloaded.
MARK = "window.__sitewardNoReload = true"
STILL_MARKED = "window.__sitewardNoReload === true"


def two_audits_of_one_site(owner):
    """Two completed audits of one site (as tests/dashboard/test_sites.py's ``two_audits``).

    The second fixed the broken link on /about, has a new h1_missing issue on /blog/,
    gained the page /new-arrival and lost /retired; ``diff.record`` stores that diff.
    """
    first = make_finished_audit(owner)
    make_page(first, f"{SITE}/retired", title="Retired page", depth=1)
    second = make_finished_audit(owner)
    # The link itself goes, as a fix does: a link still there to a 404 would not be fixed.
    Issue.objects.filter(audit=second, code="broken_link_internal", url=f"{SITE}/about").delete()
    LinkEdge.objects.filter(audit=second, source_url=f"{SITE}/about", target_url=f"{SITE}/gone").delete()
    make_issue(second, "h1_missing", f"{SITE}/blog/")
    make_page(second, f"{SITE}/new-arrival", title="New arrival", depth=1)
    Audit.objects.filter(pk=second.pk).update(issues_critical=2, issues_warning=2)
    second.refresh_from_db()
    diff.record(second)
    return first, second


def test_the_site_page_draws_the_issue_and_page_trend_of_its_completed_audits_and_lists_every_audit(
        page, owner, tmp_path):
    counts = [  # critical, warning, notice, pages: one row per completed audit, oldest first
        (3, 1, 1, 7), (2, 2, 1, 8), (5, 0, 4, 9),
    ]
    audits = []
    for critical, warning, notice, pages in counts:
        audit = make_finished_audit(owner)
        Audit.objects.filter(pk=audit.pk).update(issues_critical=critical, issues_warning=warning,
                                                 issues_notice=notice, pages_crawled=pages)
        audits.append(audit)
    failed = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="site_unavailable")
    site = audits[0].site
    assert {a.site_id for a in [*audits, failed]} == {site.pk}

    log_in(page)
    page.goto(site.get_absolute_url())
    chart = page.locator("#trend-issues")
    expect(chart).to_be_visible()
    expect(page.locator("#trend-pages")).to_be_visible()
    expect(page.locator("#no-trend")).to_have_count(0)

    for column, series in enumerate(("Critical", "Warnings", "Notices")):
        group = chart.locator(f"g.series[data-series='{series}']")
        expect(group.locator("polyline")).to_have_count(1)
        assert len(group.locator("polyline").get_attribute("points").split()) == len(counts)
        # One point per completed audit (the failed one is no point), oldest first, each titled with its value.
        titles = group.locator("circle title").all_text_contents()
        assert [t.rsplit(": ", 1) for t in titles] == [
            [f"{audit.created_at.astimezone(site.zone()):%m-%d %H:%M %Z}, {series}", str(row[column])]
            for audit, row in zip(audits, counts, strict=True)
        ]
    pages_titles = page.locator("#trend-pages g.series[data-series='Pages'] circle title").all_text_contents()
    assert [t.rsplit(": ", 1)[1] for t in pages_titles] == ["7", "8", "9"]

    # The history table lists every audit of the site, the failed one too, newest first.
    rows = page.locator("#audit-history tbody tr")
    expect(rows).to_have_count(4)
    listed = [int(row.get_attribute("data-audit")) for row in rows.all()]
    assert listed == [failed.pk] + [audit.pk for audit in audits[::-1]]
    expect(page.locator(f"#audit-history tr[data-audit='{failed.pk}']")).to_contain_text("Failed")

    path = tmp_path / "site-trend.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0
    box = chart.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0


def test_a_weekly_schedule_set_on_the_site_page_can_be_paused_and_resumed(page, owner):
    site = make_audit(owner, status=Audit.Status.COMPLETED).site
    name = f"site-{site.pk}"
    log_in(page)
    page.goto(site.get_absolute_url())
    expect(page.locator("#schedule-state")).to_contain_text("Not scheduled")
    expect(page.locator("#pause-schedule, #resume-schedule")).to_have_count(0)

    page.select_option("#id_cadence", label="Every week")
    page.select_option("#id_weekday", label="Wednesday")
    page.fill("#id_hour", "9")
    page.fill("#id_minute", "15")
    page.select_option("#id_time_zone", "Asia/Tokyo")
    page.click("#save-schedule")

    expect(page.locator(".messages")).to_contain_text("Schedule saved: next run")
    schedule = Schedule.objects.get(name=name)
    site.refresh_from_db()
    saved = (site.cadence, site.weekday, site.hour, site.minute, site.time_zone)
    assert saved == ("weekly", 3, 9, 15, "Asia/Tokyo")
    assert schedule.cron == "15 9 * * 3" and schedule.func == "audits.tasks.scheduled_run"
    in_site_zone = schedule.next_run.astimezone(site.zone())
    assert in_site_zone.strftime("%a %H:%M") == "Wed 09:15"
    expect(page.locator(".messages")).to_contain_text(f"next run {in_site_zone:%Y-%m-%d %H:%M %Z}.")
    state = page.locator("#schedule-state")
    expect(state).to_contain_text("Every week")
    expect(state).to_contain_text("15 9 * * 3")
    expect(state).to_contain_text("Asia/Tokyo")
    # The next run is shown in the site's own zone, as the message says it.
    expect(page.locator("#next-run")).to_have_text(f"{in_site_zone:%Y-%m-%d %H:%M} JST")

    page.click("#pause-schedule")
    expect(page.locator(".messages")).to_contain_text("Schedule paused")
    expect(state).to_contain_text("Paused.")
    expect(page.locator("#next-run")).to_have_count(0)
    expect(page.locator("#pause-schedule")).to_have_count(0)
    assert not Schedule.objects.filter(name=name).exists()
    assert Site.objects.get(pk=site.pk).paused

    page.click("#resume-schedule")
    expect(page.locator(".messages")).to_contain_text("Schedule resumed: next run")
    expect(state).not_to_contain_text("Paused.")
    expect(state).to_contain_text("Every week")
    expect(page.locator("#next-run")).to_be_visible()
    expect(page.locator("#pause-schedule")).to_be_visible()
    assert Schedule.objects.get(name=name).cron == "15 9 * * 3"
    assert not Site.objects.get(pk=site.pk).paused


def test_the_compare_view_opened_from_the_audit_page_swaps_each_kind_of_change_in_over_htmx(page, owner):
    first, second = two_audits_of_one_site(owner)
    log_in(page)
    page.goto(second.get_absolute_url())
    changes = page.locator("#changes")
    expect(changes).to_contain_text("Since the previous audit")
    expect(page.locator("#compare-previous")).to_have_text(f"Compare with audit {first.pk}")
    page.click("#compare-previous")
    expect(page).to_have_url(re.compile(rf"/audits/{second.pk}/compare/{first.pk}/$"))

    # Totals are the last cell of each row; persisting: the second audit's 5 issues less the new one.
    for change, total in (("new", "1"), ("persisting", "4"), ("fixed", "1"), ("unknown", "0")):
        expect(page.locator(f"#count-{change} td").last).to_have_text(total)
    expect(page.locator("#count-fixed td").first).to_have_text("1")  # the fixed broken link is critical
    expect(page.locator("#count-added")).to_have_text("1 added")
    expect(page.locator("#count-removed")).to_have_text("1 removed")
    expect(page.locator("#count-changed")).to_have_text("0 changed")

    table = page.locator("#compare-table")
    expect(table).to_have_attribute("data-show", "new")
    expect(table.locator("tr.issue")).to_have_count(1)
    expect(table.locator("tr.issue[data-code='h1_missing']")).to_have_count(1)

    page.evaluate(MARK)
    tabs = page.locator("nav#compare-tabs")
    with page.expect_request(lambda r: "show=fixed" in r.url) as fixed_request:
        tabs.locator("a", has_text="Fixed").click()
    assert fixed_request.value.headers.get("hx-request") == "true"
    expect(table).to_have_attribute("data-show", "fixed")
    expect(page).to_have_url(re.compile(r"\?show=fixed$"))
    expect(table.locator("tr.issue")).to_have_count(1)
    expect(table.locator("tr.issue[data-code='broken_link_internal']")).to_contain_text(f"{SITE}/about")
    expect(table.locator("tr.issue[data-code='h1_missing']")).to_have_count(0)
    assert page.evaluate(STILL_MARKED), "the tab reloaded the whole page instead of swapping #compare-table"

    tabs.locator("a", has_text="Added").click()
    expect(table).to_have_attribute("data-show", "added")
    expect(page).to_have_url(re.compile(r"\?show=added$"))
    expect(table.locator("tr.page-change")).to_have_count(1)
    expect(table.locator("tr.page-change.change-added")).to_contain_text(f"{SITE}/new-arrival")

    tabs.locator("a", has_text="Removed").click()
    expect(table).to_have_attribute("data-show", "removed")
    expect(page).to_have_url(re.compile(r"\?show=removed$"))
    expect(table.locator("tr.page-change")).to_have_count(1)
    expect(table.locator("tr.page-change.change-removed")).to_contain_text(f"{SITE}/retired")

    tabs.locator("a", has_text="Changed").click()
    expect(table).to_have_attribute("data-show", "changed")
    expect(page.locator("#nothing-changed")).to_be_visible()
    assert page.evaluate(STILL_MARKED)


def test_the_since_the_previous_audit_filter_narrows_the_issue_table_to_new_issues_over_htmx(page, owner):
    first, second = two_audits_of_one_site(owner)
    log_in(page)
    page.goto(f"/audits/{second.pk}/issues/")
    rows = page.locator("#issue-table tr.issue")
    expect(rows).to_have_count(Issue.objects.filter(audit=second).count())

    page.evaluate(MARK)
    page.select_option("#f-change", "new")
    expect(rows).to_have_count(1)
    expect(page.locator("#issue-table tr.issue[data-code='h1_missing']")).to_contain_text("New")
    expect(page).to_have_url(re.compile(r"[?&]change=new(&|$)"))
    assert page.evaluate(STILL_MARKED), "the filter reloaded the whole page instead of swapping #issue-table"

    # The baseline's fixed issue is listed from the same select.
    page.select_option("#f-change", "fixed")
    expect(page.locator("#issue-table tr.issue[data-code='broken_link_internal']")).to_have_count(1)
    expect(rows).to_have_count(1)
    expect(page).to_have_url(re.compile(r"[?&]change=fixed(&|$)"))


def test_the_compare_tab_marked_current_follows_an_htmx_tab_click(page, owner):
    first, second = two_audits_of_one_site(owner)
    log_in(page)
    page.goto(f"/audits/{second.pk}/compare/{first.pk}/")
    page.locator("nav#compare-tabs a", has_text="Fixed").click()
    expect(page.locator("#compare-table")).to_have_attribute("data-show", "fixed")
    expect(page.locator("nav#compare-tabs a[aria-current=page]")).to_have_text("Fixed", timeout=2000)

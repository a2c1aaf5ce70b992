"""End to end: create an audit of the loopback fixture site in the browser and watch a real crawl."""

import csv
import io
import re

import pytest
from playwright.sync_api import expect

from audits.models import Audit
from tests.crawler.fixture_site import FixtureSite

from .conftest import log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.cluster]


@pytest.fixture
def site():
    with FixtureSite() as running:
        yield running


@pytest.fixture
def cluster(cluster_factory):
    # The shared FAST environment's 4 s lease is below the settings' minimum of 5.
    cluster = cluster_factory(SITEWARD_LEASE_SECONDS=5).start()
    yield cluster
    # The crawl is over; a graceful SIGTERM stop takes the full 20 s grace here,
    # so end the test's own cluster group at once.
    cluster.kill()


def test_a_person_audits_a_site_and_watches_it_live(page, owner, cluster, site):
    progress = []
    page.on("response", lambda r: "/progress/" in r.url and progress.append(r.status))
    log_in(page)
    page.click("#new-audit")
    page.fill("#id_start_url", site.url("/"))
    page.fill("#id_max_pages", "40")
    page.fill("#id_max_depth", "3")
    # 10 requests a second keeps the ~50-request crawl running for a few seconds,
    # long enough for the 2 s poll to see it live (unthrottled it can end first).
    page.fill("#id_rate", "10")
    page.click("button:has-text('Start audit')")
    expect(page).to_have_url(re.compile(r"/audits/\d+/$"))
    audit = Audit.objects.get()
    assert audit.allow_private and audit.start_url == site.url("/")

    # The panel is refreshed by polling until the crawl ends, then the server's 286 stops it.
    try:
        expect(page.locator("#audit-status")).to_have_text("Completed", timeout=45_000)
    except AssertionError:
        raise AssertionError(f"audit did not complete; cluster log:\n{cluster.log()}") from None
    assert progress and progress[-1] == 286 and progress.count(286) == 1
    assert 200 in progress, "the panel was never refreshed while the audit ran"
    expect(page.locator("#summary")).to_contain_text("Broken internal link")
    shot(page, "11-live-crawl-completed")
    crawled = Audit.objects.get().pages_crawled
    assert crawled > 10
    expect(page.locator("#pages-crawled")).to_contain_text(f"{crawled} of")

    page.click("#link-issues")
    page.select_option("#f-code", "broken_link_internal")
    expect(page.locator("tr.issue").first).to_be_visible()
    shot(page, "12-live-crawl-issues")
    page.locator("tr.issue td.url a").nth(1).click()
    expect(page.locator("#page-status")).to_contain_text(re.compile(r"404|500"))
    expect(page.locator("#inlinks li").first).to_be_visible()
    shot(page, "13-live-crawl-broken-page")

    page.goto(audit.get_absolute_url())
    for link, column in (("#csv-pages", "url"), ("#csv-issues", "severity"), ("#csv-links", "source_url")):
        with page.expect_download() as info:
            page.click(link)
        rows = list(csv.reader(io.StringIO(open(info.value.path(), encoding="utf-8-sig").read(), newline="")))
        assert rows[0][0] == column and len(rows) > 2
        if column == "url":
            assert site.url("/broken-home") in {row[0] for row in rows}

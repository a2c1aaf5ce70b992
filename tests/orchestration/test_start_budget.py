"""The start step ends within its share of the task time limit (Q_TIMEOUT), before django-q2 would kill its worker.

Every fetch has its own budget; these sites keep each one within it and still take longer in a row.
"""

import time

import pytest

from audits.crawl.start import START_SHARE
from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite, html_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def task_limit(fast_settings):
    """A 4 s task time limit: the start step has 3.2 s."""
    fast_settings.Q_CLUSTER = {**fast_settings.Q_CLUSTER, "timeout": 4}
    return 4 * START_SHARE


def audit_of(owner, site: ScriptedSite) -> tuple[Audit, float]:
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, max_pages=10)
    started = time.monotonic()
    run_audit_inline(audit.pk)
    took = time.monotonic() - started
    audit.refresh_from_db()
    return audit, took


def test_a_front_door_slower_than_the_start_budget_fails_the_audit_as_timeout_saying_why(owner, task_limit):
    with ScriptedSite() as site:
        # Each answer within the 5 s fetch deadline; the two in a row past the budget.
        site.pages["/robots.txt"] = Answer("User-agent: *\nAllow: /\n", ctype="text/plain", delay=2.0)
        site.pages["/"] = Answer(html_page("Home").body, delay=2.0)
        audit, took = audit_of(owner, site)

    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "timeout", "starting")
    assert "front door" in audit.error_detail and "Q_TIMEOUT" in audit.error_detail
    assert audit.pages.count() == 0
    assert took < task_limit + 1.5


def test_sitemaps_get_the_time_left_and_the_audit_goes_on_with_what_was_read(owner, task_limit):
    with ScriptedSite() as site:
        site.pages["/robots.txt"] = Answer("User-agent: *\nAllow: /\nSitemap: /slow.xml\n", ctype="text/plain")
        site.pages["/"] = html_page("Home of the start budget test site", "/a")
        site.pages["/a"] = html_page("Alpha page of the start budget test site")
        site.pages["/slow.xml"] = Answer("<urlset/>", ctype="application/xml", delay=4.5)
        audit, took = audit_of(owner, site)

    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert set(audit.pages.values_list("url", flat=True)) == {site.url("/"), site.url("/a")}
    [note] = Issue.objects.filter(audit=audit, code="sitemap_invalid").values_list("message", flat=True)
    assert "time budget" in note
    # Cut at the start budget, not at the 5 s fetch deadline.
    assert took < task_limit + 1.5

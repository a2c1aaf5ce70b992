"""Private targets at crawl time: an audit's allow_private counts only while the deployment allows private
targets (SITEWARD_ALLOW_PRIVATE), except the `audit` command's, whose --allow-private is the operator's."""

import pytest
from django.core.management import call_command

from audits.crawl.setup import crawl_setup, may_reach_private
from audits.inline import run_audit_inline
from audits.models import Audit
from audits.services import PrivateTargetsRefused, rerun_audit
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

HOME = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>A small loopback site for '
        'scope tests</title></head><body><h1>Home</h1><p>Nothing much here.</p></body></html>')


def private_setting(settings, allowed: bool) -> None:
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": allowed}


@pytest.fixture
def small_site(httpserver):
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    httpserver.expect_request("/").respond_with_data(HOME, content_type="text/html")
    return httpserver


@pytest.mark.parametrize(("trigger", "stored", "deployment", "expected"), [
    (Audit.Trigger.MANUAL, True, True, True),
    (Audit.Trigger.MANUAL, True, False, False),  # revoked: the stored flag no longer counts
    (Audit.Trigger.MANUAL, False, True, False),  # the setting alone opens nothing
    (Audit.Trigger.SCHEDULE, True, False, False),
    (Audit.Trigger.SCHEDULE, False, True, False),
    (Audit.Trigger.COMMAND, True, False, True),  # --allow-private: the operator's choice
    (Audit.Trigger.COMMAND, False, True, False),
])
def test_the_crawl_admits_private_addresses_only_when_the_rule_says_so(owner, settings, trigger, stored,
                                                                      deployment, expected):
    private_setting(settings, deployment)
    audit = make_audit(owner, trigger=trigger, allow_private=stored)
    assert may_reach_private(audit) is expected
    assert crawl_setup(audit).guard.allow_private is expected


def test_a_private_audit_made_while_allowed_is_blocked_at_crawl_time_once_revoked(owner, settings, small_site):
    private_setting(settings, True)
    audit = make_audit(owner, start_url=small_site.url_for("/"), allow_private=True, max_pages=3)
    private_setting(settings, False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "ssrf_blocked", "starting")
    assert small_site.log == []


def test_the_same_audit_crawls_while_the_setting_stays_on(owner, settings, small_site):
    private_setting(settings, True)
    audit = make_audit(owner, start_url=small_site.url_for("/"), allow_private=True, max_pages=3,
                       check_external=False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)


def test_the_command_with_allow_private_crawls_a_loopback_site_with_the_setting_off(owner, settings, small_site):
    private_setting(settings, False)
    try:
        call_command("audit", small_site.url_for("/"), "--allow-private", "--no-external", "--max-pages", "3",
                     "--owner", owner.username)
    except SystemExit as exc:
        assert exc.code in (0, 1)  # issues found is fine; 2 would mean the audit failed
    audit = Audit.objects.get(owner=owner)
    assert audit.trigger == Audit.Trigger.COMMAND and audit.allow_private
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert any(request.path == "/" for request, _ in small_site.log)


def test_a_command_audit_rerun_from_the_screens_is_a_manual_audit_under_the_setting(owner, settings):
    private_setting(settings, False)
    command_audit = make_audit(owner, trigger=Audit.Trigger.COMMAND, allow_private=True,
                               start_url="http://127.0.0.1:9/", status=Audit.Status.COMPLETED)
    with pytest.raises(PrivateTargetsRefused):
        rerun_audit(command_audit)
    private_setting(settings, True)
    fresh = rerun_audit(command_audit)
    assert fresh.trigger == Audit.Trigger.MANUAL and may_reach_private(fresh)
    private_setting(settings, False)
    assert not may_reach_private(fresh)


@pytest.mark.parametrize(("render", "cap"), [("none", 32), ("auto", 32), ("all", 4)])
def test_a_rendered_audits_window_holds_no_more_pages_than_its_browser_can_take_in_turn(owner, settings, render,
                                                                                       cap):
    """With every page rendered two at a time, 32 in flight queued past the chunk's deadline and its task's limit."""
    settings.SITEWARD = {**settings.SITEWARD, "RENDER_PAGES": 2}
    audit = make_audit(owner, concurrency=32, render=render)
    assert crawl_setup(audit).window.cap == cap

"""What a validation's start step reads again (the http:// probe, the sitemaps, robots.txt): an issue of
theirs is fixed only when the read got an answer that says so, not when it was cut short or failed.

The probe's audits are of https://shop.test/ served by loopback servers, as in test_start_http_probe.
"""

from __future__ import annotations

import pytest

from audits import diff, validation
from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from audits.services import follow_up_fields
from tests.crawler.hostile_server import BUILTIN_ROUTES, OK_HTML, static
from tests.crawler.test_http_probe import START, ca, https_site  # noqa: F401 (fixtures)
from tests.factories import SITE, make_audit, make_issue

from .test_start_http_probe import http_site, start_https_audit  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def run(audit: Audit) -> Audit:
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def http_verdict(owner, http_site, then, now) -> validation.Verdict:  # noqa: F811
    """The verdict on http_not_redirected when the http:// form answered ``then``, and ``now`` (None: its port
    closed, every connection to it refused)."""
    http_site.route("/", then)
    first = run(make_audit(owner, start_url=START, max_pages=5, respect_robots=False))
    assert Issue.objects.filter(audit=first, code="http_not_redirected").exists()
    if now is None:
        http_site.stop()
    else:
        http_site.route("/", now)
    check = run(make_audit(owner, start_url=START, respect_robots=False,
                           **follow_up_fields(first, Audit.Mode.VALIDATE)))
    (verdict,) = [v for v in validation.checklist(check) if v.code == "http_not_redirected"]
    return verdict


@pytest.mark.usefixtures("start_https_audit")
def test_a_probe_cut_short_by_the_start_steps_time_is_unknown_not_fixed(owner, fast_settings, http_site):  # noqa: F811
    # The start step gets 80% of 2.5 s: the probe of an http:// form that never answers is cut at that.
    fast_settings.Q_CLUSTER = {**fast_settings.Q_CLUSTER, "timeout": 2.5}
    verdict = http_verdict(owner, http_site, static(OK_HTML), BUILTIN_ROUTES["/hang"])
    assert verdict.result == "unknown", verdict
    assert "http://" in verdict.why and "in time" in verdict.why, verdict.why


@pytest.mark.usefixtures("start_https_audit")
def test_an_http_form_behind_a_bot_wall_is_unknown_not_fixed(owner, fast_settings, http_site):  # noqa: F811
    """A 403 to our HEAD says nothing of what browsers get over http."""
    verdict = http_verdict(owner, http_site, static(OK_HTML), static(b"no robots", status=403))
    assert verdict.result == "unknown", verdict
    assert "answered 403, which refuses crawlers" in verdict.why, verdict.why


@pytest.mark.usefixtures("start_https_audit")
def test_an_http_port_closed_since_is_fixed(owner, fast_settings, http_site):  # noqa: F811
    """Refused, the connection is an answer: nothing is served over http any more."""
    verdict = http_verdict(owner, http_site, static(OK_HTML), None)
    assert verdict.result == "fixed", verdict


@pytest.mark.usefixtures("start_https_audit")
def test_an_http_form_that_serves_the_page_again_is_still_there(owner, fast_settings, http_site):  # noqa: F811
    verdict = http_verdict(owner, http_site, static(OK_HTML), static(OK_HTML))
    assert verdict.result == "still", verdict


def start_verdict(owner, code: str, url: str, *found: tuple[str, str, str]) -> validation.Verdict:
    """The verdict on the source's ``code`` issue at ``url`` when the validation's start reported ``found``."""
    source = make_audit(owner, status=Audit.Status.COMPLETED)
    make_issue(source, code, url)
    check = make_audit(owner, **follow_up_fields(source, Audit.Mode.VALIDATE))
    Audit.objects.filter(pk=check.pk).update(sitemap_found=True, status=Audit.Status.COMPLETED)
    check.refresh_from_db()
    for found_code, found_url, message in found:
        make_issue(check, found_code, found_url, message=message)
    diff.record(check)
    (verdict,) = validation.checklist(check)
    return verdict


def test_an_invalid_sitemap_is_unknown_when_the_sitemaps_were_read_only_in_part(owner):
    partly = ("sitemaps_partly_read", f"{SITE}/sitemap.xml",
              "Sitemaps read in part: the 60 s sitemap time budget ran out; 3 more files were not read.")
    verdict = start_verdict(owner, "sitemap_invalid", f"{SITE}/sitemap-2.xml", partly)
    assert verdict.result == "unknown", verdict
    assert "read only in part" in verdict.why and "3 more files were not read" in verdict.why
    # Read in full, the file gave no problem: fixed.
    assert start_verdict(owner, "sitemap_invalid", f"{SITE}/sitemap-2.xml").result == "fixed"


def test_a_missing_robots_txt_is_unknown_when_robots_txt_could_not_be_read(owner):
    unread = ("robots_txt_unavailable", f"{SITE}/robots.txt",
              "robots.txt could not be fetched; search engines treat that as 'disallow everything'.")
    verdict = start_verdict(owner, "robots_txt_missing", f"{SITE}/robots.txt", unread)
    assert verdict.result == "unknown", verdict
    assert verdict.why.startswith("robots.txt could not be read this time: robots.txt could not be fetched")
    assert start_verdict(owner, "robots_txt_missing", f"{SITE}/robots.txt").result == "fixed"

"""CHECKS.md #17: a noindex page many internal links point to is escalated to critical; a stray one is not."""

import json

import pytest
from django.core.management import call_command

from audits.finalize import NOINDEX_MANY_INLINKS
from audits.inline import run_audit_inline
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

NOINDEX = "<html><head><meta name='robots' content='noindex'><title>{0}</title></head><body>{0}</body></html>"


def test_a_noindex_page_the_navigation_links_is_critical_and_a_stray_noindex_page_stays_a_warning(
        owner, fast_settings, httpserver):
    pages = [f"/p{i}" for i in range(NOINDEX_MANY_INLINKS + 2)]
    nav = "".join(f"<a href='{p}'>{p}</a>" for p in pages) + "<a href='/members'>Members</a>"
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    httpserver.expect_request("/").respond_with_data(f"<html><body>{nav}<a href='/draft'>d</a></body></html>",
                                                     content_type="text/html")
    for p in pages:
        httpserver.expect_request(p).respond_with_data(f"<html><body>{nav}</body></html>", content_type="text/html")
    httpserver.expect_request("/members").respond_with_data(NOINDEX.format("Members"), content_type="text/html")
    httpserver.expect_request("/draft").respond_with_data(NOINDEX.format("Draft"), content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, max_pages=50)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    by_path = {i.url.rsplit("/", 1)[1]: i for i in audit.issues.filter(code="noindex")}
    assert by_path["members"].severity == "critical"
    assert f"but {len(pages) + 1} internal links point to it" in by_path["members"].message
    assert by_path["draft"].severity == "warning"
    assert audit.issues_critical == audit.issues.filter(severity="critical").count()  # the counts follow


def test_the_command_report_writes_an_escalated_issue_again_with_its_final_severity(
        fast_settings, httpserver, tmp_path):
    pages = [f"/p{i}" for i in range(NOINDEX_MANY_INLINKS)]
    nav = "".join(f"<a href='{p}'>{p}</a>" for p in [*pages, "/members"])
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    for p in ["/", *pages]:
        httpserver.expect_request(p).respond_with_data(f"<html><body>{nav}</body></html>", content_type="text/html")
    httpserver.expect_request("/members").respond_with_data(NOINDEX.format("Members"), content_type="text/html")
    out = tmp_path / "report.jsonl"
    with pytest.raises(SystemExit):
        call_command("audit", httpserver.url_for("/"), "--allow-private", "--out", str(out), "--fail-on", "critical")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    noindex = [r for r in records if r["type"] == "issue" and r["code"] == "noindex"]
    assert [(r["severity"], r.get("escalated", False)) for r in noindex] == [("warning", False), ("critical", True)]
    assert records[-1]["type"] == "summary"


def test_links_to_a_redirect_that_lands_on_a_noindex_page_count_for_it(owner, fast_settings, httpserver):
    pages = [f"/p{i}" for i in range(NOINDEX_MANY_INLINKS + 1)]
    nav = "".join(f"<a href='{p}'>{p}</a>" for p in pages) + "<a href='/old-members'>Members</a>"
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    for p in ["/", *pages]:
        httpserver.expect_request(p).respond_with_data(f"<html><body>{nav}</body></html>", content_type="text/html")
    httpserver.expect_request("/old-members").respond_with_data("", status=301, headers={"Location": "/members"})
    httpserver.expect_request("/members").respond_with_data(NOINDEX.format("Members"), content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, max_pages=50)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    [issue] = audit.issues.filter(code="noindex")
    assert issue.url == httpserver.url_for("/members")
    assert issue.severity == "critical" and f"but {len(pages) + 1} internal links point to it" in issue.message

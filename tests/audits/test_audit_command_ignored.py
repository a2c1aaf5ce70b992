"""`manage.py audit` and triage: the summary and the gates count what is not ignored, unless --include-ignored.

Real crawls of a loopback site with a broken internal link (two critical issues: the link and the 404 page);
the site's ignore rules and the review decisions of its earlier audit are applied at finalize.
"""

from __future__ import annotations

import json

import pytest

from audits.models import Audit, IgnoreRule, Issue, Site
from tests.audit_command import run_audit as exit_code_of
from tests.editable_site import EditableSite

from .test_audit_command_changes import page

pytestmark = pytest.mark.django_db


@pytest.fixture
def site():
    with EditableSite() as fixture:
        fixture.pages.update({"/": page("Home", ["/a"]), "/a": page("Alpha", ["/", "/gone"])})
        yield fixture


def run_audit(site: EditableSite, out, *args) -> tuple[int, dict]:
    """(exit code, the report's summary record)."""
    out.unlink(missing_ok=True)
    code = exit_code_of(site.url("/"), "--allow-private", "--no-external", "--out", str(out), *args)
    return code, json.loads(out.read_text().splitlines()[-1])


def test_ignored_issues_leave_the_summary_and_the_fail_on_gate_unless_include_ignored(site, tmp_path, fast_settings,
                                                                                      capsys):
    out = tmp_path / "r.jsonl"
    code, summary = run_audit(site, out)
    assert code == 1 and summary["issues"]["critical"] == 2 and summary["ignored"] == 0
    # Ignore the broken link on /a by a site rule, and the 404 page by hand (carried forward to the next run).
    first = Audit.objects.get(pk=summary["audit_id"])
    IgnoreRule.objects.create(site=Site.objects.get(), code="broken_link_internal", pattern="/a$")
    Issue.objects.filter(audit=first, code="http_4xx").update(review=Issue.Review.IGNORED)

    capsys.readouterr()
    code, summary = run_audit(site, out)
    assert code == 0 and summary["exit_code"] == 0
    assert summary["issues"]["critical"] == 0 and summary["ignored"] == 2
    console = capsys.readouterr().out
    assert "0 critical" in console and "broken links" not in console
    # The report says which: an issue's last record holds.
    last = {}
    for line in out.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "issue":
            last[(record["code"], record["url"], record["target"])] = record
    assert {code for code, *_ in last} >= {"broken_link_internal", "http_4xx"}
    assert {(code, url) for (code, url, _), record in last.items() if record.get("ignored")} == {
        ("broken_link_internal", site.url("/a")), ("http_4xx", site.url("/gone"))}
    second = Audit.objects.get(pk=summary["audit_id"])
    assert set(second.issues.filter(review="ignored").values_list("code", flat=True)) == {
        "broken_link_internal", "http_4xx"}
    assert second.issues_critical == 0 and second.score == 100

    code, summary = run_audit(site, out, "--include-ignored")
    assert code == 1 and summary["issues"]["critical"] == 2 and summary["ignored"] == 2
    assert "2 critical" in capsys.readouterr().out


def test_fail_on_new_skips_new_issues_a_rule_ignores(site, tmp_path, fast_settings):
    out = tmp_path / "r.jsonl"
    first_id = run_audit(site, out)[1]["audit_id"]
    IgnoreRule.objects.create(site=Site.objects.get(), code="broken_link_internal", pattern="/b$")
    IgnoreRule.objects.create(site=Site.objects.get(), code="http_4xx", pattern="/also-gone$")
    site.pages["/b"] = page("Bravo", ["/", "/also-gone"])
    site.pages["/"] = page("Home", ["/a", "/b"])
    code, summary = run_audit(site, out, "--fail-on-new", "critical")
    # New: the broken link on /b, the 404 of /also-gone (both ignored by the rules) and a notice on /b;
    # ignored issues leave the change counts as they leave every total.
    assert code == 0 and summary["changes"]["new"] == 1 and summary["ignored"] == 2
    # The change records count as the summary does.
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sum(1 for r in records if r["type"] == "change" and r["change"] == "new") == 1
    code, summary = run_audit(site, out, "--compare-to", str(first_id), "--fail-on-new", "critical",
                              "--include-ignored")
    assert code == 1 and summary["changes"]["new"] == 3

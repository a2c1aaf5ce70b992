"""`manage.py audit` exit codes a CI pipeline reads: 1 means issues were found, and nothing else does."""

from __future__ import annotations

import json

import pytest

from audits.management.commands import audit as audit_command
from audits.models import Audit
from tests.audit_command import run_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db

HOME = (b'<!DOCTYPE html><html lang="en"><head><title>Home of a tiny site</title></head>'
        b'<body><h1>Home</h1><a href="/about">About</a></body></html>')
ABOUT = (b'<!DOCTYPE html><html lang="en"><head><title>About a tiny site</title></head>'
         b"<body><h1>About</h1></body></html>")


@pytest.fixture
def site():
    with ScriptedSite() as scripted:
        scripted.pages.update({"/": Answer(HOME), "/about": Answer(ABOUT)})
        yield scripted


def test_an_error_no_step_records_fails_the_audit_and_exits_3_not_the_1_of_issues_found(
        site, tmp_path, fast_settings, monkeypatch, capsys):
    def finalize_that_breaks(audit_id):
        raise RuntimeError("the cross-page checks broke")

    monkeypatch.setattr(audit_command, "run_finalize", finalize_that_breaks)
    out = tmp_path / "r.jsonl"
    assert run_audit(site.url("/"), "--allow-private", "--no-external", "--out", str(out)) == 3
    summary = json.loads(out.read_text().splitlines()[-1])
    assert summary["type"] == "summary" and summary["exit_code"] == 3
    assert summary["status"] == "failed" and summary["error_code"] == "internal_error"
    assert summary["error_detail"] == "RuntimeError: the cross-page checks broke"
    audit = Audit.objects.get(pk=summary["audit_id"])
    assert audit.status == Audit.Status.FAILED and audit.pages.count() == 2  # what was crawled stays
    console = capsys.readouterr().out
    assert "stopped: Internal error — RuntimeError: the cross-page checks broke" in console
    assert "exit code 3" in console


@pytest.mark.parametrize("option", [["--fail-on", "critical"], ["--out", "report.jsonl"], ["--allow-unknown"]])
def test_a_gate_or_report_given_with_enqueue_is_refused_with_exit_2_not_passed_with_0(
        site, fast_settings, option, capsys):
    assert run_audit(site.url("/"), "--allow-private", "--enqueue", *option) == 2
    assert f"{option[0]} has no effect with --enqueue" in capsys.readouterr().err
    assert Audit.objects.count() == 0 and sum(site.requests.values()) == 0

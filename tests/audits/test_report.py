"""The JSON Lines report of ``manage.py audit``: one JSON object a line, whatever the site's text."""

import io
import json
from types import SimpleNamespace

import pytest

from audits.management.jsonl_report import Report
from audits.models import Issue
from crawler.page import PageOutcome
from crawler.types import FetchError, FetchResult, PageFacts
from tests.audit_command import CountingFlushes
from tests.factories import make_finished_audit

# Strings a crawled site controls, with everything JSON must escape.
HOSTILE = [
    "",
    "plain",
    'quote " and backslash \\ and slash /',
    "tab\tnewline\ncarriage\rformfeed\x0cbackspace\x08 and \x01\x1f controls",
    "unicode “curly” é 日本語 😀",
    "</script><script>alert(1)</script>",
    "line separator \u2028 and paragraph separator \u2029",
]


def _outcome(url: str, *, title: str | None, error: FetchError | None = None) -> PageOutcome:
    result = FetchResult(url=url, final_url=url + "?final", status=None if error else 200, error=error)
    facts = None if error else PageFacts(title=title)
    return PageOutcome(url, 2, result, facts, (), ())


def test_a_batch_writes_one_line_per_page_then_its_issues_in_order():
    out = io.StringIO()
    issues = [
        SimpleNamespace(url="http://s/a", code="missing_h1", severity="warning", target_url="", message="No h1",
                        key="k1"),
        SimpleNamespace(url="http://s/a", code="thin_content", severity="notice", target_url="", message="Thin",
                        key="k2"),
        SimpleNamespace(url="http://s/b", code="broken_link_internal", severity="critical",
                        target_url="http://s/x", message="Link “x” answered 404", key="k3"),
    ]
    Report(out).batch([_outcome("http://s/a", title="A “title”"), _outcome("http://s/b", title=None),
                       _outcome("http://s/c", title=None, error=FetchError.READ_TIMEOUT)], issues,
                      ["page", "page", "resource"])
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["type"] for r in records] == ["page"] * 3 + ["issue"] * 3
    assert records[0] == {"type": "page", "kind": "page", "url": "http://s/a", "final_url": "http://s/a?final", "status": 200,
                          "depth": 2, "title": "A “title”", "error": None, "issues": ["missing_h1", "thin_content"]}
    assert records[1]["issues"] == ["broken_link_internal"] and records[1]["title"] is None
    assert records[2]["kind"] == "resource"
    assert records[2]["error"] == "read_timeout" and records[2]["status"] is None and records[2]["issues"] == []
    assert [(r["code"], r["target"], r["key"]) for r in records[3:]] == [
        ("missing_h1", None, "k1"), ("thin_content", None, "k2"), ("broken_link_internal", "http://s/x", "k3")]


def test_the_header_is_one_record_naming_the_schema_version_and_is_flushed_at_once():
    out = CountingFlushes()
    Report(out).header()
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [{"type": "report", "version": 1}]
    assert out.lines_at_flush == [1]  # a reader following the file sees it before the first page


def test_issue_values_write_every_row_in_order_and_flush_every_2000_lines_and_at_the_end():
    out = CountingFlushes()
    rows = [("code", "notice", f"http://s/{n}", None, f"message {n}") for n in range(4500)]
    Report(out).issue_values(iter(rows))
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["url"] for r in records] == [f"http://s/{n}" for n in range(4500)]
    assert out.lines_at_flush == [2000, 4000, 4500]


def test_hostile_text_from_a_site_comes_back_exactly_one_record_a_line():
    out = io.StringIO()
    issues = [SimpleNamespace(url=f"http://s/{text}", code="missing_h1", severity="warning",
                              target_url=f"http://t/{text}" if text else "", message=text, key="k")
              for text in HOSTILE]
    Report(out).batch([_outcome(f"http://s/{text}", title=text) for text in HOSTILE], issues, ["page"] * len(HOSTILE))
    lines = out.getvalue().split("\n")
    assert lines.pop() == ""  # the report ends with a newline, and no record spans two lines
    records = [json.loads(line) for line in lines]
    pages, issue_records = records[:len(HOSTILE)], records[len(HOSTILE):]
    assert [(r["url"], r["title"], r["issues"]) for r in pages] == [
        (f"http://s/{text}", text, ["missing_h1"]) for text in HOSTILE]
    assert [(r["message"], r["target"]) for r in issue_records] == [
        (text, f"http://t/{text}" if text else None) for text in HOSTILE]


@pytest.mark.django_db
def test_the_summary_line_closes_the_report_counting_what_is_not_ignored(owner):
    audit = make_finished_audit(owner)  # 3 critical (two broken links, one 404), 1 warning, 1 notice
    Issue.objects.filter(audit=audit, code="broken_link_internal").update(review=Issue.Review.IGNORED)
    Issue.objects.filter(audit=audit, code="title_length").update(review=Issue.Review.REVIEWED)  # still counts
    out = io.StringIO()
    Report(out).summary(audit, 1)
    assert json.loads(out.getvalue()) == {
        "type": "summary", "audit_id": audit.pk, "status": "completed", "error_code": None, "error_detail": None,
        "pages": 7, "issues": {"critical": 1, "warning": 1, "notice": 1}, "ignored": 2, "mode": "full", "from_audit_id": None,
        "thresholds": {"title_min": 20, "title_max": 60, "description_min": 80, "description_max": 160,
                       "slow_ms": 800, "large_html_bytes": 2_000_000, "thin_words": 200, "max_redirect_hops": 10,
                       "deep_depth": 4, "large_image_bytes": 500_000},
        "exit_code": 1}
    out = io.StringIO()
    Report(out).summary(audit, 1, include_ignored=True)
    assert json.loads(out.getvalue())["issues"] == {"critical": 3, "warning": 1, "notice": 1}


def test_no_output_file_means_nothing_is_composed_and_no_row_is_read():
    touched = []

    class Watched:
        def __getattr__(self, name):
            touched.append(name)
            raise AttributeError(name)

    def rows():
        touched.append("issue rows read")
        yield ("code", "notice", "http://s/a", None, "m")

    report = Report(None)
    report.header()
    report.batch([Watched()], [Watched()], ["page"])
    report.issue_values(rows())
    report.summary(Watched(), 0)
    assert touched == []

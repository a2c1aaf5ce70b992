"""The JSON Lines report of ``manage.py audit``: lines composed from quoted fields are exact JSON."""

import io
import json
from types import SimpleNamespace

import pytest

from audits.management.commands.audit import _JSON, Report
from crawler.page import PageOutcome
from crawler.types import FetchError, FetchResult, PageFacts

# Strings a crawled site controls, with everything JSON must escape.
HOSTILE = [
    "",
    "plain",
    'quote " and backslash \\ and slash /',
    "tab\tnewline\ncarriage\rformfeed\x0cbackspace\x08 and \x01\x1f controls",
    "unicode “curly” é 日本語 😀 and a lone surrogate \ud800",
    "</script><script>alert(1)</script>",
]


def test_page_lines_are_the_json_the_encoder_gives_for_the_same_record():
    for text in HOSTILE:
        for status, error, title in ((200, None, text), (None, "read_timeout", None), (0, None, ""),
                                     (2**70, None, "big")):
            codes = ["missing_title", text] if text else []
            line = Report.page_line(f"http://a/{text}", f"http://b/{text}", status, 3, title, error, codes)
            record = {"type": "page", "url": f"http://a/{text}", "final_url": f"http://b/{text}",
                      "status": status, "depth": 3, "title": title, "error": error, "issues": codes}
            assert line == _JSON.encode(record) + "\n"
            assert line.count("\n") == 1 and json.loads(line) == record


def test_issue_lines_are_the_json_the_encoder_gives_and_an_empty_target_is_null():
    for text in HOSTILE:
        for target in (None, "", f"http://t/{text}"):
            line = Report.issue_line("broken_link_internal", "critical", f"http://a/{text}", target, text)
            record = {"type": "issue", "code": "broken_link_internal", "severity": "critical",
                      "url": f"http://a/{text}", "target": target or None, "message": text}
            assert line == _JSON.encode(record) + "\n"
            assert json.loads(line)["target"] == (target or None)


def _outcome(url: str, *, title: str | None, error: FetchError | None = None) -> PageOutcome:
    result = FetchResult(url=url, final_url=url + "?final", status=None if error else 200, error=error)
    facts = None if error else PageFacts(title=title)
    return PageOutcome(url, 2, result, facts, (), ())


def test_a_batch_writes_one_line_per_page_then_its_issues_in_order():
    out = io.StringIO()
    issues = [
        SimpleNamespace(url="http://s/a", code="missing_h1", severity="warning", target_url="", message="No h1"),
        SimpleNamespace(url="http://s/a", code="thin_content", severity="notice", target_url="", message="Thin"),
        SimpleNamespace(url="http://s/b", code="broken_link_internal", severity="critical",
                        target_url="http://s/x", message="Link “x” answered 404"),
    ]
    Report(out).batch([_outcome("http://s/a", title="A “title”"), _outcome("http://s/b", title=None),
                       _outcome("http://s/c", title=None, error=FetchError.READ_TIMEOUT)], issues)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["type"] for r in records] == ["page"] * 3 + ["issue"] * 3
    assert records[0] == {"type": "page", "url": "http://s/a", "final_url": "http://s/a?final", "status": 200,
                          "depth": 2, "title": "A “title”", "error": None, "issues": ["missing_h1", "thin_content"]}
    assert records[1]["issues"] == ["broken_link_internal"] and records[1]["title"] is None
    assert records[2]["error"] == "read_timeout" and records[2]["status"] is None and records[2]["issues"] == []
    assert [(r["code"], r["target"]) for r in records[3:]] == [
        ("missing_h1", None), ("thin_content", None), ("broken_link_internal", "http://s/x")]


def test_issue_values_write_every_row_in_order_and_flush_every_2000_lines_and_at_the_end():
    class Counting(io.StringIO):
        def __init__(self):
            super().__init__()
            self.lines_at_flush = []

        def flush(self):
            self.lines_at_flush.append(self.getvalue().count("\n"))
            super().flush()

    out = Counting()
    rows = [("code", "notice", f"http://s/{n}", None, f"message {n}") for n in range(4500)]
    Report(out).issue_values(iter(rows))
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["url"] for r in records] == [f"http://s/{n}" for n in range(4500)]
    assert out.lines_at_flush == [2000, 4000, 4500]


def test_a_status_that_is_not_an_int_is_refused_not_written_wrong():
    with pytest.raises(TypeError):
        Report.page_line("http://s/a", "http://s/a", 200.5, 1, None, None, [])


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
    report.batch([Watched()], [Watched()])
    report.issue_values(rows())
    assert touched == []

"""`manage.py audit --compare-to / --fail-on-new`: what changed since an earlier audit of the site, and a CI
gate on new issues only. Real crawls of a loopback site whose pages the test edits between runs."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from audits.management import jsonl_report
from audits.management.jsonl_report import Report
from audits.models import Audit, GoneIssue, Issue
from tests.audit_command import CountingFlushes
from tests.audit_command import run_audit as exit_code_of
from tests.editable_site import EditableSite
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def page(title: str, links=(), *, description: bool = True, extra: str = "") -> bytes:
    """A page with nothing wrong of its own (beyond notices every page of this site shares)."""
    anchors = "".join(f'<p><a href="{href}">Go to {href}</a></p>' for href in links)
    words = " ".join(f"{title.split()[0].lower()}{n}" for n in range(250))  # distinct text: no duplicates
    meta = (f'<meta name="description" content="{title}: one page of the small site the command tests '
            'audit twice, on loopback, to see what changed.">') if description else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title} | A small site audited twice</title>{meta}</head>"
            f"<body><h1>{title}</h1><p>{words}</p>{anchors}{extra}</body></html>").encode()


@pytest.fixture
def site():
    with EditableSite() as fixture:
        yield fixture


def run_audit(site: EditableSite, out, *args) -> tuple[int, list[dict]]:
    """The command as `manage.py audit` runs it: (exit code, report records)."""
    out.unlink(missing_ok=True)
    code = exit_code_of(site.url("/"), "--allow-private", "--no-external", "--out", str(out), *args)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return code, records


def of(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["type"] == kind]


def changes(site: EditableSite, records: list[dict]) -> list[tuple]:
    """The change records as (change, code, severity, path, target path), sorted."""
    def path(url):
        return url.removeprefix(site.url("")) if url else url
    return sorted((r["change"], r["code"], r["severity"], path(r["url"]), path(r["target"]))
                  for r in of(records, "change"))


def build_first_version(site: EditableSite) -> None:
    site.pages.clear()
    site.pages.update({
        "/": page("Home", ["/a", "/b", "/c"]),
        "/a": page("Alpha", ["/", "/old-broken"]),  # old debt: a broken internal link
        "/b": page("Bravo", ["/"], description=False),  # fixed next time
        "/c": page("Charlie", ["/"], extra='<img src="/pic.png">'),  # unlinked next time: its issues unknown
    })


def test_compare_to_previous_writes_every_change_after_the_issues_and_counts_them(site, tmp_path, fast_settings,
                                                                                 capsys):
    build_first_version(site)
    code, first = run_audit(site, tmp_path / "r.jsonl")
    assert code == 1 and "change" not in {r["type"] for r in first}
    assert "changes" not in first[-1] and "baseline_id" not in first[-1]  # no --compare-to, no comparison
    first_id = first[-1]["audit_id"]

    site.pages.update({"/": page("Home", ["/a", "/b"]), "/b": page("Bravo", ["/", "/new-broken"])})
    capsys.readouterr()
    code, records = run_audit(site, tmp_path / "r.jsonl", "--compare-to", "previous")
    assert code == 1  # --fail-on critical, the default, still fails on old debt
    assert changes(site, records) == [
        ("fixed", "meta_description_missing", "warning", "/b", None),
        ("new", "broken_link_internal", "critical", "/b", "/new-broken"),
        ("new", "http_4xx", "critical", "/new-broken", None),
        ("persisting", "broken_link_internal", "critical", "/a", "/old-broken"),
        ("persisting", "canonical_missing", "notice", "/", None),
        ("persisting", "canonical_missing", "notice", "/a", None),
        ("persisting", "canonical_missing", "notice", "/b", None),
        ("persisting", "http_4xx", "critical", "/old-broken", None),
        ("persisting", "robots_txt_missing", "notice", "/robots.txt", None),
        ("persisting", "sitemap_missing", "notice", "/sitemap.xml", None),
        ("unknown", "broken_resource", "warning", "/c", "/pic.png"),
        ("unknown", "canonical_missing", "notice", "/c", None),
        ("unknown", "http_4xx", "critical", "/pic.png", None),
        ("unknown", "img_alt_missing", "warning", "/c", "/pic.png"),
    ]
    # Written after finalize (after every issue record), grouped new, fixed, persisting, unknown; then the summary.
    kinds = [r["type"] for r in records]
    assert kinds.index("change") > max(i for i, kind in enumerate(kinds) if kind == "issue")
    assert kinds[-1] == "summary" and set(kinds[kinds.index("change"):-1]) == {"change"}
    order = [r["change"] for r in of(records, "change")]
    assert order == sorted(order, key=["new", "fixed", "persisting", "unknown"].index)
    assert set(of(records, "change")[0]) == {"type", "change", "code", "severity", "url", "target", "key"}
    # The key joins a change record to its issue record (a fixed one's to the baseline's).
    issue_keys = {r["key"] for r in of(records, "issue")}
    assert {r["key"] for r in of(records, "change") if r["change"] == "new"} <= issue_keys

    summary = records[-1]
    assert summary["baseline_id"] == first_id and summary["exit_code"] == 1
    assert summary["changes"] == {"new": 2, "fixed": 1, "persisting": 7, "unknown": 4}
    assert list(summary["changes"]) == ["new", "fixed", "persisting", "unknown"]
    assert Audit.objects.get(pk=summary["audit_id"]).baseline_id == first_id
    console = capsys.readouterr().out
    assert f"Comparing with audit {first_id}" in console
    assert f"changes since audit {first_id}: 2 new, 1 fixed, 7 persisting, 4 unknown" in console


def test_fail_on_new_fails_on_new_issues_at_its_level_not_on_old_debt(site, tmp_path, fast_settings):
    out = tmp_path / "r.jsonl"
    build_first_version(site)
    assert run_audit(site, out)[0] == 1  # the baseline: critical issues already there

    # Nothing changed: old critical issues persist, and --fail-on-new passes where --fail-on fails.
    code, records = run_audit(site, out, "--fail-on-new", "critical")
    assert code == 0 and records[-1]["exit_code"] == 0
    assert records[-1]["issues"]["critical"] == 3 and records[-1]["changes"]["new"] == 0
    assert {r["change"] for r in of(records, "change")} == {"persisting"}  # compared with previous, unasked
    assert run_audit(site, out, "--fail-on", "critical")[0] == 1
    # Both given: either one fails the run (here --fail-on, on the old debt).
    code, records = run_audit(site, out, "--fail-on", "critical", "--fail-on-new", "critical")
    assert code == 1 and records[-1]["changes"]["new"] == 0
    stable_id = records[-1]["audit_id"]

    # A new warning is below a critical gate, and at a warning gate.
    site.pages["/a"] = page("Alpha", ["/", "/old-broken"], description=False)
    code, records = run_audit(site, out, "--fail-on-new", "critical")
    assert code == 0
    assert changes(site, records)[:1] == [("new", "meta_description_missing", "warning", "/a", None)]
    code, records = run_audit(site, out, "--compare-to", str(stable_id), "--fail-on-new", "warning")
    assert code == 1 and records[-1]["baseline_id"] == stable_id and records[-1]["changes"]["new"] == 1

    # A newly broken internal link: new critical issues fail the gate.
    site.pages["/b"] = page("Bravo", ["/", "/new-broken"], description=False)
    code, records = run_audit(site, out, "--fail-on-new", "critical")
    assert code == 1 and records[-1]["exit_code"] == 1
    assert [c for c in changes(site, records) if c[0] == "new"] == [
        ("new", "broken_link_internal", "critical", "/b", "/new-broken"),
        ("new", "http_4xx", "critical", "/new-broken", None),
    ]


def test_with_no_earlier_audit_the_run_goes_on_and_nothing_counts_as_new(site, tmp_path, fast_settings, capsys):
    build_first_version(site)
    code, records = run_audit(site, tmp_path / "r.jsonl", "--fail-on-new", "critical")
    assert code == 0  # critical issues, but none new: the first audit becomes the baseline
    summary = records[-1]
    assert summary["status"] == "completed" and summary["issues"]["critical"] == 3
    assert summary["baseline_id"] is None and summary["changes"] is None
    assert of(records, "change") == []
    console = capsys.readouterr().out
    assert "Nothing to compare with: no earlier completed audit of this site" in console
    assert "changes: nothing to compare with" in console
    # --compare-to previous alone keeps --fail-on's default gate.
    other = EditableSite()
    with other:
        other.pages.update(site.pages)
        code, records = run_audit(other, tmp_path / "o.jsonl", "--compare-to", "previous")
    assert code == 1 and records[-1]["changes"] is None


def test_an_audit_that_fails_has_no_changes(tmp_path, fast_settings):
    with EditableSite() as gone:
        build_first_version(gone)
        assert run_audit(gone, tmp_path / "r.jsonl")[0] == 1
    code, records = run_audit(gone, tmp_path / "r.jsonl", "--fail-on-new", "critical")  # nothing listens now
    assert code == 3 and records[-1]["status"] == "failed"
    assert records[-1]["changes"] is None and of(records, "change") == []


def test_an_unusable_compare_to_exits_2_before_anything_is_stored_or_fetched(site, tmp_path, fast_settings,
                                                                             owner, stranger, capsys):
    build_first_version(site)
    theirs = make_audit(stranger, start_url=site.url("/"), status=Audit.Status.COMPLETED)
    other_site = make_audit(owner, start_url=site.url("/a"), status=Audit.Status.COMPLETED)
    failed = make_audit(owner, start_url=site.url("/"), status=Audit.Status.FAILED)
    missing = failed.pk + 1000
    cases = [
        ([str(missing)], f"--compare-to: there is no audit {missing}"),
        ([str(theirs.pk)], f"--compare-to: audit {theirs.pk} belongs to another user, not 'owner'"),
        ([str(other_site.pk)], f"--compare-to: audit {other_site.pk} is of {site.url('/a')}, not {site.url('/')}"),
        ([str(failed.pk)], f"--compare-to: audit {failed.pk} is failed; only a completed audit"),
        (["last"], "--compare-to: expected an audit id or 'previous', not 'last'"),
        (["previous", "--fail-on-new", "critical", "--enqueue"], "--fail-on-new has no effect with --enqueue"),
    ]
    count = Audit.objects.count()
    for args, message in cases:
        code, records = run_audit(site, tmp_path / "r.jsonl", "--owner", "owner", "--compare-to", *args)
        assert (code, records) == (2, []), args
        assert message in capsys.readouterr().err
    assert Audit.objects.count() == count and sum(site.requests.values()) == 0
    # The stranger's own audit is theirs to compare with.
    code, records = run_audit(site, tmp_path / "r.jsonl", "--owner", "stranger", "--compare-to", str(theirs.pk))
    assert code == 1 and records[-1]["baseline_id"] == theirs.pk


def test_enqueue_pins_the_baseline_before_the_start_is_enqueued(site, fast_settings, owner, capsys,
                                                                django_capture_on_commit_callbacks):
    earlier = make_audit(owner, start_url=site.url("/"), status=Audit.Status.COMPLETED)
    with django_capture_on_commit_callbacks() as callbacks:
        call_command("audit", site.url("/"), "--allow-private", "--owner", "owner", "--enqueue",
                     "--compare-to", str(earlier.pk))
        audit = Audit.objects.get(pk=int(capsys.readouterr().out))
        assert audit.baseline_id == earlier.pk
    assert len(callbacks) == 1 and sum(site.requests.values()) == 0


def test_change_records_are_streamed_in_chunks_from_the_stored_diff(owner, monkeypatch, django_assert_num_queries):
    audit = make_audit(owner)
    url = "https://shop.example/"
    Issue.objects.bulk_create(
        Issue(audit=audit, url=f"{url}{n}", code="title_missing", severity="critical", message="m", key=f"k{n}",
              target_url="", change="new" if n % 2 else "persisting") for n in range(7))
    Issue.objects.create(audit=audit, url=url, code="title_missing", severity="critical", message="m", key="none")
    GoneIssue.objects.bulk_create(
        GoneIssue(audit=audit, url=f"{url}g{n}", code="broken_link_internal", severity="critical", message="m",
                  key=f"g{n}", target_url=f"{url}x", change="unknown" if n == 2 else "fixed") for n in range(3))
    monkeypatch.setattr(jsonl_report, "FLUSH_EVERY", 2)
    out = CountingFlushes()
    Report(out).changes(audit)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["change"], r["url"].removeprefix(url)) for r in records] == [
        ("new", "1"), ("new", "3"), ("new", "5"), ("fixed", "g0"), ("fixed", "g1"),
        ("persisting", "0"), ("persisting", "2"), ("persisting", "4"), ("persisting", "6"), ("unknown", "g2")]
    assert records[3]["target"] == f"{url}x" and records[0]["target"] is None
    # Every FLUSH_EVERY lines and at the end of each kind of change.
    assert out.lines_at_flush == [2, 3, 5, 5, 7, 9, 9, 10]
    with django_assert_num_queries(0):
        Report(None).changes(audit)

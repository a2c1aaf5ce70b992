"""`manage.py audit --mode validate|delta --from AUDIT_ID|previous`: the modes from the command line."""

from __future__ import annotations

import json

import pytest

from audits.models import Audit, Site
from tests.audit_command import run_audit
from tests.editable_site import EditableSite
from tests.scripted_site import Answer, ScriptedSite, listing
from tests.versioned_site import VersionedSite

pytestmark = pytest.mark.django_db


def records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_delta_run_marks_each_page_record_unchanged_or_not(tmp_path, fast_settings):
    with VersionedSite(20) as site:
        assert run_audit(site.url(), "--allow-private", "--no-external", "--fail-on", "critical") in (0, 1)
        site.bump(7)
        out = tmp_path / "delta.jsonl"
        run_audit(site.url(), "--allow-private", "--no-external", "--mode", "delta", "--from", "previous",
                  "--out", str(out))
    lines = records(out)
    pages = {r["url"]: r["unchanged"] for r in lines if r["type"] == "page" and r["status"] in (200, 304)}
    assert pages[site.url("/p/7")] is False and pages[site.url()] is False
    assert sum(pages.values()) == 18
    summary = lines[-1]
    first = Audit.objects.filter(mode=Audit.Mode.FULL).get()
    assert summary["mode"] == "delta" and summary["from_audit_id"] == first.pk and summary["status"] == "completed"


def test_a_validation_run_writes_its_checklist_and_gates_on_what_is_still_there(tmp_path, fast_settings, capsys):
    heading = '<html lang="en"><head><title>A page of the command site</title></head><body>{}<a href="/">home</a>' \
              '<a href="/b">b</a></body></html>'
    with EditableSite() as web:
        web.pages.update({"/": heading.format(""), "/b": heading.format('<a href="/gone">gone</a>')})
        assert run_audit(web.url("/"), "--allow-private", "--no-external") == 1  # the broken link is critical
        first = Audit.objects.get()
        web.set(**{"/b": heading.format('<h1>Now with a heading</h1><a href="/gone">back</a>'),
                   "/gone": heading.format("Restored")})
        out = tmp_path / "validate.jsonl"
        code = run_audit(web.url("/"), "--allow-private", "--no-external", "--mode", "validate", "--from",
                         str(first.pk), "--out", str(out))
    lines = records(out)
    verdicts = {(r["code"], r["url"].removeprefix(web.base)): r["result"] for r in lines if r["type"] == "validation"}
    assert verdicts[("broken_link_internal", "/b")] == "fixed"
    assert verdicts[("h1_missing", "/b")] == "fixed"
    assert verdicts[("http_4xx", "/gone")] == "fixed"
    assert verdicts[("h1_missing", "/")] == "still"
    summary = lines[-1]
    assert summary["mode"] == "validate" and summary["from_audit_id"] == first.pk
    assert summary["validation"]["fixed"] == sum(1 for r in verdicts.values() if r == "fixed")
    assert code == 0  # nothing critical is left
    console = capsys.readouterr().out
    assert f"validation of audit {first.pk}:" in console and "[still] h1_missing on" in console
    # The validation's page budget is its own: the site keeps the limits people gave it.
    assert Site.objects.get().max_pages == 500


def test_a_noindex_page_the_sitemap_lists_is_still_critical_in_a_validation_and_fails_its_gate(tmp_path,
                                                                                                 fast_settings):
    """A validation does not read the sitemap, yet the noindex it finds again is the one its source found critical:
    the checklist, the issue rows and the default --fail-on critical gate all say so."""
    def html(title: str, head: str = "", body: str = "") -> Answer:
        return Answer(f'<!doctype html><html lang="en"><head><title>{title}</title>{head}</head>'
                      f'<body><h1>{title}</h1><p>Some words.</p><a href="/">home</a>{body}</body></html>')

    with ScriptedSite() as web:
        web.pages.update({"/": html("Home of the noindex site", body='<a href="/p">p</a>'),
                          "/p": html("A page kept out of search", head='<meta name="robots" content="noindex">'),
                          **listing(web, ["/", "/p"])})
        assert run_audit(web.url("/"), "--allow-private", "--no-external") == 1
        first = Audit.objects.get()
        assert first.issues.get(code="noindex").severity == "critical"
        out = tmp_path / "validate.jsonl"
        code = run_audit(web.url("/"), "--allow-private", "--no-external", "--mode", "validate", "--from",
                         str(first.pk), "--out", str(out))
    check = Audit.objects.get(mode=Audit.Mode.VALIDATE)
    lines = records(out)
    (verdict,) = [r for r in lines if r["type"] == "validation" and r["code"] == "noindex"]
    assert (verdict["result"], verdict["severity"]) == ("still", "critical")
    assert check.issues.get(code="noindex").severity == "critical"
    # The last record of the issue holds: the one written again once finalize kept its source's severity.
    (last,) = [r for r in lines if r["type"] == "issue" and r["code"] == "noindex"][-1:]
    assert last["severity"] == "critical"
    assert code == 1


def _page(title: str, body: str = "", head: str = "") -> Answer:
    return Answer(f'<!doctype html><html lang="en"><head><title>{title}</title>{head}</head>'
                  f'<body><h1>{title}</h1><p>Some words.</p><a href="/">home</a>{body}</body></html>')


def test_a_validation_whose_rechecks_could_not_run_fails_its_gate_unless_unknown_is_allowed(
        tmp_path, fast_settings, capsys):
    """robots.txt now refuses every URL that carried a critical issue: none was shown fixed, and a gate that
    passed would let a pipeline believe it had been."""
    with ScriptedSite() as web:
        web.pages.update({"/": _page("Home of the unknown site", '<a href="/b">b</a>'),
                          "/b": _page("A page with a broken link", '<a href="/gone">gone</a>'),
                          **listing(web, ["/", "/b"])})
        assert run_audit(web.url("/"), "--allow-private", "--no-external") == 1  # the broken link is critical
        first = Audit.objects.get()
        web.pages.update(listing(web, ["/"], rules="Disallow: /b\nDisallow: /gone"))
        capsys.readouterr()
        out = tmp_path / "validate.jsonl"
        code = run_audit(web.url("/"), "--allow-private", "--no-external", "--mode", "validate", "--from",
                         str(first.pk), "--out", str(out))
        console = capsys.readouterr().out
        allowed_out = tmp_path / "allowed.jsonl"
        allowed = run_audit(web.url("/"), "--allow-private", "--no-external", "--mode", "validate", "--from",
                            str(first.pk), "--allow-unknown", "--out", str(allowed_out))
    lines = records(out)
    critical = {(r["code"], r["url"].removeprefix(web.base)): r["result"] for r in lines
                if r["type"] == "validation" and r["severity"] == "critical"}
    assert critical == {("broken_link_internal", "/b"): "unknown", ("http_4xx", "/gone"): "unknown"}
    assert code == 1 and lines[-1]["exit_code"] == 1 and lines[-1]["unknown_gated"] == 2
    assert "2 unknown at the --fail-on level fail the gate" in console and "exit code 1" in console
    assert allowed == 0  # what a person who accepts unknown verdicts asks for
    assert records(allowed_out)[-1]["unknown_gated"] == 0


def test_an_unknown_verdict_of_a_check_across_the_whole_site_does_not_fail_a_validations_gate(
        tmp_path, fast_settings):
    """No validation ever re-runs it: counting it would fail every re-check of such an issue, whatever was fixed."""
    with ScriptedSite() as web:
        web.pages.update({"/": _page("Home of the canonical site", '<a href="/b">b</a>'),
                          "/b": _page("A page whose canonical is gone", head='<link rel="canonical" href="/old">'),
                          **listing(web, ["/", "/b"])})
        assert run_audit(web.url("/"), "--allow-private", "--no-external") == 1
        first = Audit.objects.get()
        web.pages["/old"] = _page("The canonical page, back again")
        out = tmp_path / "validate.jsonl"
        code = run_audit(web.url("/"), "--allow-private", "--no-external", "--mode", "validate", "--from",
                         str(first.pk), "--out", str(out))
    verdicts = {r["code"]: (r["result"], r["severity"]) for r in records(out) if r["type"] == "validation"}
    assert verdicts["canonical_bad_target"] == ("unknown", "critical")
    assert code == 0


def test_a_validation_from_the_command_line_crawls_as_its_source_did(fast_settings):
    """Read another way (deeper, other patterns, another agent), a page could lose an issue it still has."""
    with EditableSite() as web:
        web.pages.update({"/": '<html><head><title>A page of the command site</title></head><body></body></html>'})
        run_audit(web.url("/"), "--allow-private", "--no-external", "--max-depth", "3", "--exclude", "/private",
                  "--user-agent", "SourceBot/1.0", "--ignore-robots")
        first = Audit.objects.get()
        run_audit(web.url("/"), "--allow-private", "--mode", "validate", "--from", str(first.pk))
    check = Audit.objects.get(mode=Audit.Mode.VALIDATE)
    fields = ["max_depth", "exclude_patterns", "include_patterns", "user_agent", "respect_robots", "check_external",
              "render"]
    assert {f: getattr(check, f) for f in fields} == {f: getattr(first, f) for f in fields}
    assert (check.max_depth, check.user_agent, check.check_external) == (3, "SourceBot/1.0", False)


def test_a_delta_from_the_command_line_crawls_as_its_source_did_but_for_what_it_is_told(fast_settings):
    """A pipeline's delta of a 10,000-page audit made with other limits must not drop to the defaults unsaid."""
    with EditableSite() as web:
        web.pages.update({"/": '<html><head><title>A page of the command site</title></head><body></body></html>'})
        run_audit(web.url("/"), "--allow-private", "--no-external", "--max-depth", "3", "--max-pages", "40",
                  "--exclude", "/private", "--user-agent", "SourceBot/1.0", "--render", "none",
                  "--threshold", "title_max=70")
        first = Audit.objects.get()
        run_audit(web.url("/"), "--allow-private", "--mode", "delta", "--from", str(first.pk))
        run_audit(web.url("/"), "--allow-private", "--mode", "delta", "--from", "previous", "--max-pages", "30",
                  "--threshold", "title_min=5")
    same, told = Audit.objects.filter(mode=Audit.Mode.DELTA).order_by("pk")
    fields = ["max_pages", "max_depth", "exclude_patterns", "include_patterns", "user_agent", "respect_robots",
              "check_external", "render", "thresholds"]
    assert {f: getattr(same, f) for f in fields} == {f: getattr(first, f) for f in fields}
    assert same.source_id == first.pk and same.check_external is False
    assert (told.max_pages, told.max_depth, told.user_agent) == (30, 3, "SourceBot/1.0")
    assert told.thresholds == {"title_max": 70, "title_min": 5}


@pytest.mark.parametrize("flag", [["--max-depth", "2"], ["--render", "all"], ["--ignore-robots"], ["--include", "/a"]])
def test_a_validation_refuses_crawl_settings_other_than_its_sources(flag, capsys, fast_settings):
    """Dropped unsaid, they would let a person think they re-checked another way; the source's own are fine."""
    with EditableSite() as web:
        web.pages.update({"/": '<html><head><title>A page of the command site</title></head><body></body></html>'})
        run_audit(web.url("/"), "--allow-private", "--no-external")
        capsys.readouterr()
        assert run_audit(web.url("/"), "--allow-private", "--mode", "validate", "--from", "previous", *flag) == 2
        assert f"{flag[0]} cannot change a validation's crawl" in capsys.readouterr().err
        assert Audit.objects.count() == 1
        assert run_audit(web.url("/"), "--allow-private", "--no-external", "--max-depth", "10", "--mode",
                         "validate", "--from", "previous") in (0, 1)
    assert Audit.objects.filter(mode=Audit.Mode.VALIDATE).count() == 1


def test_a_validation_cannot_start_from_a_validation(capsys, fast_settings):
    """It holds only what it re-checked: the source's other issues would drop out of the next one unsaid."""
    with EditableSite() as web:
        web.pages.update({"/": '<html><head><title>A page of the command site</title></head><body></body></html>'})
        run_audit(web.url("/"), "--allow-private", "--no-external")
        first = Audit.objects.get()
        run_audit(web.url("/"), "--allow-private", "--mode", "validate", "--from", str(first.pk))
        check = Audit.objects.get(mode=Audit.Mode.VALIDATE)
        capsys.readouterr()
        assert run_audit(web.url("/"), "--allow-private", "--mode", "validate", "--from", str(check.pk)) == 2
    assert "is a validation" in capsys.readouterr().err
    assert Audit.objects.count() == 2


@pytest.mark.parametrize("args, message", [
    (["--from", "1"], "--from needs --mode"),
    (["--mode", "delta"], "needs --from"),
    (["--mode", "validate", "--from", "previous"], "no completed audit"),
    (["--mode", "validate", "--from", "999"], "there is no audit 999"),
    (["--mode", "validate", "--from", "1", "--compare-to", "previous"], "--compare-to"),
    (["--allow-unknown"], "--allow-unknown needs --mode validate"),
    (["--mode", "delta", "--from", "1", "--allow-unknown"], "--allow-unknown needs --mode validate"),
])
def test_a_mode_that_cannot_run_exits_2_before_anything_is_fetched(args, message, capsys, fast_settings):
    assert run_audit("http://127.0.0.1:9/", "--allow-private", *args) == 2
    assert message in capsys.readouterr().err
    assert not Audit.objects.exists()


@pytest.mark.parametrize("flag, given", [
    ("--from", "²"), ("--from", "٣"), ("--compare-to", "²"), ("--compare-to", "¹²"),
])
def test_an_audit_id_of_non_ascii_digits_exits_2_instead_of_a_traceback(flag, given, capsys, fast_settings):
    mode = ["--mode", "validate"] if flag == "--from" else []
    assert run_audit("http://127.0.0.1:9/", "--allow-private", *mode, flag, given) == 2
    assert f"{flag}: expected an audit id" in capsys.readouterr().err
    assert not Audit.objects.exists()


def test_a_run_cannot_start_from_an_audit_being_deleted(capsys, fast_settings):
    with EditableSite() as web:
        web.pages.update({"/": '<html><head><title>A page of the command site</title></head><body></body></html>'})
        run_audit(web.url("/"), "--allow-private", "--no-external")
        first = Audit.objects.get()
        Audit.objects.filter(pk=first.pk).update(deleting=True)  # audits.purge has begun on it
        capsys.readouterr()
        assert run_audit(web.url("/"), "--allow-private", "--mode", "delta", "--from", str(first.pk)) == 2
        assert "is being deleted" in capsys.readouterr().err
        assert run_audit(web.url("/"), "--allow-private", "--mode", "validate", "--from", "previous") == 2
    assert "no completed audit" in capsys.readouterr().err
    assert Audit.objects.count() == 1


def test_a_delta_from_previous_on_a_sites_first_run_crawls_it_in_full(tmp_path, fast_settings, capsys):
    """A nightly pipeline runs one command: its first night has nothing to start from, as --fail-on-new's."""
    with VersionedSite(5) as site:
        out = tmp_path / "first.jsonl"
        assert run_audit(site.url(), "--allow-private", "--no-external", "--mode", "delta", "--from", "previous",
                         "--out", str(out), "--fail-on", "critical") in (0, 1)
        assert "crawls it in full" in capsys.readouterr().out
        first = Audit.objects.get()
        assert (first.mode, first.source_id, first.status) == (Audit.Mode.FULL, None, Audit.Status.COMPLETED)
        summary = records(out)[-1]
        assert (summary["mode"], summary["from_audit_id"], summary["pages"]) == ("full", None, first.pages_crawled)
        assert first.pages_crawled >= 5
        run_audit(site.url(), "--allow-private", "--no-external", "--mode", "delta", "--from", "previous")
    assert Audit.objects.get(mode=Audit.Mode.DELTA).source_id == first.pk


def test_a_long_checklist_prints_forty_issues_and_says_how_many_more_there_are(tmp_path, fast_settings, capsys):
    page = '<html lang="en"><head><title>Page {} of the long command site</title></head><body>' \
           '<a href="/">home</a></body></html>'
    links = "".join(f'<a href="/p{n}">{n}</a>' for n in range(30))
    with EditableSite() as web:
        web.pages.update({"/": f'<html lang="en"><head><title>The long command site</title></head><body>{links}'
                               '</body></html>'})
        web.pages.update({f"/p{n}": page.format(n) for n in range(30)})  # each without a heading or description
        run_audit(web.url("/"), "--allow-private", "--no-external")
        first = Audit.objects.get()
        capsys.readouterr()
        out = tmp_path / "validate.jsonl"
        run_audit(web.url("/"), "--allow-private", "--no-external", "--mode", "validate", "--from", str(first.pk),
                  "--out", str(out))
    console = capsys.readouterr().out.splitlines()
    listed = [line for line in console if line.startswith("    [")]
    left = sum(1 for r in records(out) if r["type"] == "validation" and r["result"] != "fixed")
    assert left > 40 and len(listed) == 40
    assert f"    ... and {left - 40} more still there or unknown (--out writes every verdict)" in console

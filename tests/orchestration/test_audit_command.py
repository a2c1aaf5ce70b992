"""`manage.py audit`: the CI gate. Exit codes, the streamed JSON Lines report, --enqueue, Ctrl-C."""

import json
import os
import signal
import subprocess
import time
from collections import Counter

import pytest
from django.db import OperationalError, connection
from django_q.models import OrmQ

from audits.crawl import chunk
from audits.forms import MAX_CONCURRENCY, MAX_DEPTH, MAX_PAGES
from audits.models import Audit
from tests import driver_errors
from tests.audit_command import run_audit
from tests.conftest import MANAGE, ROOT, subprocess_env
from tests.crawler.fixture_site import BROKEN_INTERNAL, FixtureSite

from .grid_site import GridSite

pytestmark = pytest.mark.django_db


@pytest.fixture
def site():
    with FixtureSite() as fixture:
        yield fixture


def test_a_site_with_critical_issues_exits_1_and_writes_a_jsonl_report(site, tmp_path, fast_settings, capsys):
    out = tmp_path / "report.jsonl"
    code = run_audit(site.url("/"), "--allow-private", "--max-pages", "60", "--out", str(out))
    assert code == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = {r["type"] for r in records}
    assert kinds == {"report", "page", "issue", "summary"}
    assert records[0] == {"type": "report", "version": 1}  # first, so a reader knows the shapes that follow
    assert records[-1]["type"] == "summary" and records[-1]["exit_code"] == 1
    pages = {r["url"]: r for r in records if r["type"] == "page"}
    home = pages[site.url("/")]
    assert home["status"] == 200 and home["depth"] == 0 and home["title"]
    assert {"url", "kind", "final_url", "status", "depth", "title", "issues"} <= set(home)
    # Links to other sites and checked resources are records too, told apart from the pages the summary counts.
    by_kind = Counter(r["kind"] for r in records if r["type"] == "page")
    assert by_kind["page"] == records[-1]["pages"] and by_kind["external"] > 0
    broken = [r for r in records if r["type"] == "issue" and r["code"] == "broken_link_internal"]
    assert {r["target"].removeprefix(site.url("")) for r in broken} >= set(BROKEN_INTERNAL)
    assert all({"code", "severity", "url", "target", "message"} <= set(r) for r in broken)
    console = capsys.readouterr().out
    assert "pages by status" in console and "broken links" in console and "exit code 1" in console
    audit = Audit.objects.get(pk=records[-1]["audit_id"])
    assert audit.status == "completed"  # stored like any other audit


def test_a_site_without_critical_issues_exits_0_and_fail_on_warning_is_stricter(tmp_path, fast_settings):
    with GridSite(pages=3) as small:
        # Three linked pages and no broken links: nothing critical, but warnings remain.
        out = tmp_path / "r.jsonl"
        assert run_audit(small.url("/"), "--allow-private", "--out", str(out)) == 0
        severities = {json.loads(line).get("severity") for line in out.read_text().splitlines()}
        assert "critical" not in severities and "warning" in severities
        assert run_audit(small.url("/"), "--allow-private", "--fail-on", "warning") == 1


def test_usage_errors_exit_2_with_the_new_audit_forms_message(fast_settings, capsys):
    assert run_audit("ftp://example.com/") == 2
    assert "url: Only http:// and https:// addresses can be audited, not ftp:." in capsys.readouterr().err
    assert run_audit("http://127.0.0.1:9/", "--max-pages", "0", "--allow-private") == 2
    assert "--max-pages: Ensure this value is greater than or equal to 1." in capsys.readouterr().err
    assert run_audit("http://127.0.0.1:9/", "--include", "([unclosed", "--allow-private") == 2
    assert "--include: Not a usable regular expression" in capsys.readouterr().err
    assert Audit.objects.count() == 0


def test_the_bounds_are_the_new_audit_forms(fast_settings, capsys):

    for option, value in (("--max-pages", MAX_PAGES), ("--max-depth", MAX_DEPTH),
                          ("--concurrency", MAX_CONCURRENCY)):
        assert run_audit("http://127.0.0.1:9/", option, str(value + 1), "--allow-private") == 2
        assert f"{option}: Ensure this value is less than or equal to {value}." in capsys.readouterr().err
    assert run_audit("http://127.0.0.1:9/", "--rate", "0", "--allow-private") == 2
    assert "--rate: Ensure this value is greater than or equal to 0.1." in capsys.readouterr().err
    assert Audit.objects.count() == 0


def test_a_private_address_is_refused_without_allow_private(site, fast_settings, settings, capsys):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": False}
    assert run_audit(site.url("/")) == 2
    err = capsys.readouterr().err
    assert "127.0.0.1 is a loopback address" in err and "(use --allow-private" in err
    assert site.hits("/") == 0 and Audit.objects.count() == 0


def test_an_audit_that_cannot_start_exits_3_not_the_2_of_a_usage_error_and_says_why_on_stderr(
        fast_settings, tmp_path, capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "r.jsonl"
    assert run_audit(f"http://127.0.0.1:{port}/", "--allow-private", "--out", str(out)) == 3
    summary = json.loads(out.read_text().splitlines()[-1])
    assert summary["status"] == "failed" and summary["error_code"] == "start_url_unreachable"
    assert summary["exit_code"] == 3
    assert f"error: audit {summary['audit_id']} failed: start_url_unreachable: " in capsys.readouterr().err


def test_the_report_holds_every_issue_the_gate_counts_the_site_wide_ones_too(fast_settings, tmp_path):
    from werkzeug.wrappers import Response

    from tests.loopback import Loopback

    def handle(request):
        if request.path == "/robots.txt":
            return Response(f"User-agent: *\nAllow: /\nSitemap: {site.url('/sitemap.xml')}\n", content_type="text/plain")
        if request.path == "/sitemap.xml":
            return Response("this is no sitemap", content_type="application/xml")
        return Response("<!doctype html><html lang=en><head><title>Home page of the site</title></head>"
                        "<body><h1>Home</h1></body></html>", content_type="text/html")

    with Loopback(handle) as site:
        out = tmp_path / "r.jsonl"
        run_audit(site.url("/"), "--allow-private", "--out", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    reported = {r["code"] for r in records if r["type"] == "issue"}
    stored = set(Audit.objects.get(pk=records[-1]["audit_id"]).issues.values_list("code", flat=True))
    assert "sitemap_invalid" in stored
    assert reported == stored


def test_enqueue_hands_the_audit_to_the_cluster_and_prints_its_id(site, fast_settings, capsys,
                                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert run_audit(site.url("/"), "--allow-private", "--enqueue") == 0
    audit_id = int(capsys.readouterr().out.strip())
    audit = Audit.objects.get(pk=audit_id)
    assert audit.status == "queued"
    assert [row.name() for row in OrmQ.objects.all()] == [f"audit-{audit_id}-start"]


def test_enqueue_refuses_a_cluster_that_would_run_a_chunk_twice(site, fast_settings, settings, capsys):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 300, "retry": 200}
    assert run_audit(site.url("/"), "--allow-private", "--enqueue") == 2
    assert "siteward.E002" in capsys.readouterr().err
    assert Audit.objects.count() == 0 and OrmQ.objects.count() == 0


def test_the_command_line_runs_the_system_checks_and_a_failed_one_exits_2(site):
    # From the command line Django runs every system check first, as for any
    # command: a cluster that would run a chunk twice stops even an in-process audit.
    result = subprocess.run(
        MANAGE + ["audit", site.url("/"), "--allow-private", "--max-pages", "5"],
        cwd=ROOT, env=subprocess_env(Q_TIMEOUT=300, Q_RETRY=200), capture_output=True, text=True,
    )
    assert result.returncode == 2, result.stderr
    assert "siteward.E002" in result.stderr
    assert site.hits("/") == 0 and Audit.objects.count() == 0


def crawling(command: list[str], site: GridSite, out) -> subprocess.Popen:
    """``command audit`` of the slow ``site`` in a process of its own, once it has written five page records."""
    proc = subprocess.Popen(
        command + ["audit", site.url("/"), "--allow-private", "--concurrency", "2", "--out", str(out)],
        cwd=ROOT, env=subprocess_env(SITEWARD_CHUNK_SIZE=20), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not out.exists() or out.read_text().count('"type": "page"') < 5):
        time.sleep(0.2)
    return proc


# SIGTERM is what a CI job's timeout or cancel and `docker stop` send: it must end the audit as Ctrl-C does.
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
@pytest.mark.django_db(transaction=True)
def test_ctrl_c_or_sigterm_exits_130_keeps_partial_results_and_cancels_the_audit(tmp_path, stop):
    with GridSite(pages=200, delay=0.05) as slow:
        out = tmp_path / "r.jsonl"
        proc = crawling(MANAGE, slow, out)
        proc.send_signal(stop)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[-1]["type"] == "summary" and records[-1]["status"] == "cancelled"
    assert records[-1]["exit_code"] == 130
    audit = Audit.objects.get(pk=records[-1]["audit_id"])
    assert audit.status == "cancelled" and audit.pages.count() >= 5
    assert os.path.getsize(out) > 0
    assert "exit code 130" in output


# manage.py audit, its wind-down held open for a second after it prints WINDING DOWN, so a second
# signal lands in it for certain: the real cancel runs, only later.
SLOW_WIND_DOWN = """
import sys, time
import django
django.setup()
from audits.models import Audit
cancel = Audit.cancel
def cancel_later(self, *args, **kwargs):
    print("WINDING DOWN", flush=True)
    time.sleep(1)
    return cancel(self, *args, **kwargs)
Audit.cancel = cancel_later
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", *sys.argv[1:]])
"""


# A second Ctrl-C is a habit, and CI follows its SIGINT with SIGTERM: neither may cut the summary short.
@pytest.mark.parametrize("again", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c_twice", "sigterm_after_ctrl_c"])
@pytest.mark.django_db(transaction=True)
def test_a_second_signal_while_the_run_winds_down_still_writes_the_summary_and_exits_130(tmp_path, again):
    with GridSite(pages=200, delay=0.05) as slow:
        out = tmp_path / "r.jsonl"
        proc = crawling([MANAGE[0], "-c", SLOW_WIND_DOWN], slow, out)
        proc.send_signal(signal.SIGINT)
        before = []
        for line in proc.stdout:  # until the run is cancelling the audit
            before.append(line)
            if "WINDING DOWN" in line:
                proc.send_signal(again)
                break
        output = "".join(before) + proc.communicate(timeout=30)[0]
    assert "WINDING DOWN" in output and proc.returncode == 130, output
    summary = json.loads(out.read_text().splitlines()[-1])
    assert summary["type"] == "summary" and summary["status"] == "cancelled" and summary["exit_code"] == 130
    assert Audit.objects.get(pk=summary["audit_id"]).status == "cancelled"
    assert "Traceback" not in output and "exit code 130" in output
    assert "Ignored 1 interrupt(s) that came while the run was winding down." in output


def interrupted_at_second_claim(tmp_path, monkeypatch, interrupt) -> dict:
    """The command's audit of a small site, ``interrupt(audit_id)`` run as its second chunk is claimed;
    it must exit 130. The report's summary record."""
    claim = chunk.claim

    def claim_or_interrupt(audit_id, number):
        return claim(audit_id, number) if number < 2 else interrupt(audit_id)

    monkeypatch.setattr(chunk, "claim", claim_or_interrupt)
    with GridSite(pages=40) as grid:
        out = tmp_path / "r.jsonl"
        assert run_audit(grid.url("/"), "--allow-private", "--out", str(out)) == 130
    return json.loads(out.read_text().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_that_leaves_the_connection_mid_query_still_cancels_and_exits_130(tmp_path, fast_settings,
                                                                                  monkeypatch):
    # Ctrl-C can land while psycopg waits for a query's result and leave the
    # connection with that command still in progress ("another command is
    # already in progress" on the next query). Here the interrupt lands as the
    # second chunk is claimed, with the connection left in just that state.
    stored_before = []

    def mid_query(audit_id):
        stored_before.append(Audit.objects.get(pk=audit_id).pages.count())
        if connection.vendor == "postgresql":
            connection.ensure_connection()
            connection.connection.pgconn.send_query(b"SELECT pg_sleep(0.2)")
        raise KeyboardInterrupt

    summary = interrupted_at_second_claim(tmp_path, monkeypatch, mid_query)
    assert summary["type"] == "summary" and summary["status"] == "cancelled" and summary["exit_code"] == 130
    audit = Audit.objects.get(pk=summary["audit_id"])
    assert audit.status == "cancelled" and audit.error_code == "cancelled"
    assert stored_before[0] > 1 and audit.pages.count() == stored_before[0]  # what was crawled stays


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_in_a_transactions_exit_before_autocommit_came_back_still_commits_the_cancel(
        tmp_path, fast_settings, monkeypatch):
    # An interrupt in an atomic block's exit, before it restored autocommit, leaves Django in a transaction
    # nobody commits: a cancel written there would be rolled back as the process exits, the audit left running.
    def out_of_autocommit(audit_id):
        connection.set_autocommit(False)  # where the interrupt left it
        raise KeyboardInterrupt

    summary = interrupted_at_second_claim(tmp_path, monkeypatch, out_of_autocommit)
    connection.close()  # as the process ends: what was not committed is gone
    assert Audit.objects.get(pk=summary["audit_id"]).status == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_that_a_sql_function_turns_into_a_database_error_still_cancels_and_exits_130(
        tmp_path, fast_settings, monkeypatch):
    # An interrupt that lands while SQLite runs one of Django's SQL functions in Python
    # comes out of the query as OperationalError("user-defined function raised
    # exception"), the KeyboardInterrupt gone. Here the second chunk's claim meets one.
    def meeting_ctrl_c(audit_id):
        try:
            os.kill(os.getpid(), signal.SIGINT)  # the command's handler raises here, as inside a SQL function
            time.sleep(5)
        except KeyboardInterrupt:
            raise driver_errors.sqlite_function_raised()  # noqa: B904 (its cause is SQLite's error, as Django's)
        raise AssertionError("the interrupt never came")

    summary = interrupted_at_second_claim(tmp_path, monkeypatch, meeting_ctrl_c)
    assert summary["status"] == "cancelled" and summary["exit_code"] == 130


def test_a_value_the_database_refuses_before_the_crawl_exits_2_not_the_issues_found_code(fast_settings, capsys):
    """A lone surrogate (an undecodable byte in the shell) passes the form but no database encodes it."""
    assert run_audit("http://127.0.0.1:9/", "--allow-private", "--user-agent", "Bot\udcff") == 2
    assert "UnicodeEncodeError" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a disk that is always full")
def test_a_report_the_disk_cannot_hold_exits_3_once_the_audit_exists(site, fast_settings, capsys):
    """Past the audit's creation an error is the run's failure, to retry, not the job's usage error."""
    assert run_audit(site.url("/"), "--allow-private", "--no-external", "--out", "/dev/full") == 3
    assert "No space left on device" in capsys.readouterr().err
    assert Audit.objects.get().status == Audit.Status.FAILED


def test_an_error_between_the_audits_creation_and_its_crawl_fails_the_audit_and_exits_3(
        site, fast_settings, monkeypatch, capsys):
    """Pinning the baseline runs before the crawl's own handling: no step would ever end the audit left queued."""
    def database_gone(self, audit, *args):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr("audits.management.commands.audit.Command._set_baseline", database_gone)
    assert run_audit(site.url("/"), "--allow-private", "--no-external", "--compare-to", "previous") == 3
    assert "server closed the connection" in capsys.readouterr().err
    audit = Audit.objects.get()
    assert (audit.status, audit.error_code) == (Audit.Status.FAILED, Audit.ErrorCode.INTERNAL_ERROR)


def test_a_crawl_whose_steps_ran_out_unfinished_fails_the_audit_and_exits_3(site, fast_settings, monkeypatch):
    """A chunk that gave up on the database leaves no step to run: the audit must not stay running."""
    monkeypatch.setattr("audits.inline.run_chunk", lambda *args, **kwargs: "db-unavailable")
    assert run_audit(site.url("/"), "--allow-private", "--no-external") == 3
    audit = Audit.objects.get()
    assert (audit.status, audit.error_code) == (Audit.Status.FAILED, Audit.ErrorCode.DB_UNAVAILABLE)


def test_a_command_line_run_keeps_the_sites_saved_settings_and_a_nightly_run_ignores_it_as_baseline(
        owner, fast_settings):
    from audits import diff
    from audits.models import Site
    from tests.factories import make_audit

    with GridSite(pages=3) as small:
        nightly = make_audit(owner, start_url=small.url("/"), max_pages=300, allow_private=True,
                             trigger=Audit.Trigger.SCHEDULE, status=Audit.Status.COMPLETED)
        assert run_audit(small.url("/"), "--allow-private", "--owner", owner.username, "--max-pages", "5") == 0
    ci = Audit.objects.filter(site=nightly.site).exclude(pk=nightly.pk).get()
    assert ci.max_pages == 5 and Site.objects.get(pk=nightly.site_id).max_pages == 300
    tonight = make_audit(owner, start_url=nightly.start_url, trigger=Audit.Trigger.SCHEDULE)
    assert diff.baseline_for(tonight) == nightly  # what the CI run found is still news tonight
    by_hand = make_audit(owner, start_url=nightly.start_url)
    assert diff.baseline_for(by_hand) == ci


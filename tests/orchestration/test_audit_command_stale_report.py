"""`manage.py audit --out FILE`: after any run, FILE is this run's report or absent, never an earlier run's.

A pipeline reads the report after the step, whatever its exit code: an earlier audit's left in place
would read as this run's results.
"""

import os
import subprocess

import pytest
from django.core.management import CommandError, call_command

from audits.management.commands.audit import Command
from audits.models import Audit
from tests.audit_command import run_audit
from tests.conftest import MANAGE, ROOT, subprocess_env

pytestmark = pytest.mark.django_db

EARLIER = '{"type": "summary", "status": "completed", "exit_code": 0}\n'
START = "http://127.0.0.1:9/"


@pytest.fixture
def earlier(tmp_path):
    """An earlier run's report, where this run is told to write its own."""
    report = tmp_path / "report.jsonl"
    report.write_text(EARLIER)
    return report


@pytest.mark.parametrize("args", [
    pytest.param(["ftp://example.com/"], id="bad_url"),
    pytest.param([START, "--allow-private", "--max-pages", "0"], id="bad_limit"),
    pytest.param([START, "--allow-private", "--threshold", "nope=1"], id="bad_threshold"),
    pytest.param([START, "--allow-private", "--compare-to", "999"], id="unknown_compare_to"),
    pytest.param([START, "--allow-private", "--mode", "validate", "--from", "previous"], id="unusable_from"),
    pytest.param([START, "--allow-private", "--enqueue"], id="enqueue"),
    pytest.param([START, "--allow-private", "--owner", "nobody"], id="unknown_owner"),
    # Passes the form, but no database encodes it: the run ends before its report is written.
    pytest.param([START, "--allow-private", "--user-agent", "Bot\udcff"], id="value_the_database_refuses"),
])
def test_it_removes_an_earlier_report_when_the_run_is_refused(args, earlier, fast_settings):
    assert run_audit(*args, "--out", str(earlier)) == 2
    assert not earlier.exists()
    assert Audit.objects.count() == 0


def test_it_removes_an_earlier_report_when_the_sites_access_refuses_the_run(earlier, fast_settings, monkeypatch):
    monkeypatch.setenv("STAGING_AUTH", "ann:pw")
    monkeypatch.setenv("SITE_AUTH", "Authorization: Bearer t")
    assert run_audit(START, "--allow-private", "--enqueue", "--auth-basic-env", "STAGING_AUTH") == 0
    # Refused: stored basic auth and an Authorization header would both go out.
    assert run_audit(START, "--allow-private", "--header-env", "SITE_AUTH", "--out", str(earlier)) == 2
    assert not earlier.exists()
    assert Audit.objects.count() == 1


def test_it_removes_an_earlier_report_when_a_system_check_fails(earlier, fast_settings, settings):
    """From the command line Django runs the system checks before handle(); the report goes before them."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 300, "retry": 200}
    with pytest.raises(CommandError, match="siteward.E002") as raised:
        call_command("audit", START, "--allow-private", "--out", str(earlier), skip_checks=False)
    assert raised.value.returncode == 2
    assert not earlier.exists()


@pytest.mark.parametrize("spelling", ["separate", "joined"])
def test_it_removes_an_earlier_report_when_argparse_refuses_an_option(spelling, earlier, capsys):
    """A bad option value is refused while the command line is parsed, before the command runs at all."""
    out = ["--out", str(earlier)] if spelling == "separate" else [f"--out={earlier}"]
    with pytest.raises(SystemExit) as raised:
        Command().run_from_argv(["manage.py", "audit", START, *out, "--max-pages", "many"])
    assert raised.value.code == 2
    assert "invalid int value: 'many'" in capsys.readouterr().err
    assert not earlier.exists()


def test_through_a_symbolic_link_it_removes_the_file_the_link_names(earlier, tmp_path, fast_settings):
    """The pipeline reads the linked file: removing only the link would leave the earlier report there."""
    link = tmp_path / "latest.jsonl"
    link.symlink_to(earlier)
    assert run_audit("ftp://example.com/", "--out", str(link)) == 2
    assert not earlier.exists() and not os.path.exists(link)


def test_standard_output_and_what_is_not_a_regular_file_are_left_alone(tmp_path, monkeypatch, fast_settings):
    """`--out -` is standard output, not a file named "-"; a named pipe (or /dev/null) holds no earlier report."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text(EARLIER)
    assert run_audit("ftp://example.com/", "--out", "-") == 2
    assert (tmp_path / "-").read_text() == EARLIER
    os.mkfifo(tmp_path / "pipe")
    assert run_audit("ftp://example.com/", "--out", str(tmp_path / "pipe")) == 2
    assert (tmp_path / "pipe").is_fifo()


def test_a_run_that_writes_its_report_replaces_the_earlier_one(earlier, fast_settings):
    """A failed audit (exit 3) still writes what it crawled, as its report."""
    assert run_audit(START, "--allow-private", "--out", str(earlier)) == 3
    lines = earlier.read_text().splitlines()
    assert '"start_url_unreachable"' in lines[-1] and EARLIER.strip() not in lines


def test_a_report_its_directory_forbids_removing_is_emptied_instead(earlier, fast_settings, monkeypatch):
    """As a writable file in a read-only directory: writing the report there worked, so the run must too."""
    remove = os.remove

    def forbidden(path, *args, **kwargs):
        if os.fspath(path) == str(earlier):
            raise PermissionError(13, "Permission denied", str(path))
        return remove(path, *args, **kwargs)

    monkeypatch.setattr(os, "remove", forbidden)
    assert run_audit("ftp://example.com/", "--out", str(earlier)) == 2
    assert earlier.read_text() == ""


@pytest.mark.parametrize("abbreviation", ["--o", "--ou"])
def test_an_abbreviated_option_is_refused_and_the_file_after_it_left_alone(abbreviation, tmp_path, capsys):
    """Options are spelt out: "--o" may be --owner as well as --out, and what follows it no report of ours."""
    notes = tmp_path / "notes.txt"
    notes.write_text("kept")
    with pytest.raises(SystemExit) as raised:
        Command().run_from_argv(["manage.py", "audit", START, abbreviation, str(notes)])
    assert raised.value.code == 2 and f"unrecognized arguments: {abbreviation}" in capsys.readouterr().err
    assert notes.read_text() == "kept"


def test_standard_output_named_by_its_path_and_redirected_to_a_file_keeps_that_file(tmp_path):
    """/dev/stdout leads to the file the shell redirected it to: the report's own destination, not an earlier one."""
    redirected = tmp_path / "report.jsonl"
    with redirected.open("w") as stdout:
        result = subprocess.run(MANAGE + ["audit", START, "--allow-private", "--max-pages", "0", "--out", "/dev/stdout"],
                                cwd=ROOT, env=subprocess_env(), stdout=stdout, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 2 and "max-pages" in result.stderr.replace("_", "-").lower(), result.stderr
    assert redirected.exists()

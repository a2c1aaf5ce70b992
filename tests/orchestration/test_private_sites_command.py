"""`manage.py audit` on private sites: secrets come from environment variables and go nowhere else."""

from __future__ import annotations

import json

import pytest

from audits.models import Audit, SiteAccess
from tests.audit_command import run_audit
from tests.login_site import PASSWORD, USER, LoginSite, RequestLog

pytestmark = pytest.mark.django_db


def report_of(out) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_basic_auth_from_an_environment_variable_audits_the_site_and_the_report_never_holds_it(
        tmp_path, monkeypatch, fast_settings, capsys):
    monkeypatch.setenv("STAGING_AUTH", f"{USER}:{PASSWORD}")
    out = tmp_path / "r.jsonl"
    with RequestLog() as elsewhere, LoginSite(mode="basic") as site:
        site.external = elsewhere.url("/x")
        run_audit(site.url("/"), "--allow-private", "--out", str(out), "--auth-basic-env", "STAGING_AUTH")
        records = report_of(out)
        assert records[-1]["status"] == "completed"
        pages = [r for r in records if r["type"] == "page" and "/account/" in r["url"]]
        assert len(pages) == len(site.paths()) and {r["status"] for r in pages} == {200}
        assert elsewhere.log and all("Authorization" not in h for h in elsewhere.log)
    printed = capsys.readouterr()
    for text in (out.read_text(), printed.out, printed.err):
        assert PASSWORD not in text
    assert PASSWORD not in SiteAccess.objects.get().basic_password  # sealed at rest


def test_a_form_login_from_the_command_line_logs_in_once_and_never_follows_logout(tmp_path, monkeypatch,
                                                                                   fast_settings):
    monkeypatch.setenv("SITE_PASSWORD", PASSWORD)
    out = tmp_path / "r.jsonl"
    with LoginSite() as site:
        code = run_audit(site.url("/"), "--allow-private", "--no-external", "--out", str(out),
                         "--login-url", site.url("/login/"), "--login-field", f"username={USER}",
                         "--login-secret-field", "password=SITE_PASSWORD", "--login-success", "Members")
        assert code == 0, report_of(out)[-1]
        assert site.logins == 1
        assert not [path for _, path, _ in site.log if path.startswith("/logout")]
    assert PASSWORD not in out.read_text()


def test_a_failed_login_ends_the_audit_as_login_failed_with_exit_code_3(tmp_path, monkeypatch, fast_settings):
    monkeypatch.setenv("SITE_PASSWORD", "wrong")
    out = tmp_path / "r.jsonl"
    with LoginSite() as site:
        code = run_audit(site.url("/"), "--allow-private", "--no-external", "--out", str(out),
                         "--login-url", site.url("/login/"), "--login-field", f"username={USER}",
                         "--login-secret-field", "password=SITE_PASSWORD", "--login-success", "Members")
    summary = report_of(out)[-1]
    assert (summary["status"], summary["error_code"]) == ("failed", "login_failed")
    assert code == 3 and Audit.objects.get().error_code == "login_failed"  # 3: the audit could not run


@pytest.mark.parametrize("args, message", [
    (["--auth-basic-env", "NOT_SET_ANYWHERE"], "NOT_SET_ANYWHERE is not set"),
    (["--login-url", "http://127.0.0.2:9/login", "--login-success", "x"], "credentials never leave the site"),
    (["--login-field", "user=ann"], "need --login-url"),
    (["--logout-pattern", "/bye"], "--logout-pattern needs"),
])
def test_bad_private_site_options_exit_2_before_anything_is_stored(args, message, capsys, fast_settings):
    assert run_audit("http://127.0.0.1:9/", "--allow-private", *args) == 2
    assert message in capsys.readouterr().err
    assert not Audit.objects.exists()


def test_a_header_variable_without_a_colon_is_refused_without_printing_what_it_holds(monkeypatch, capsys):
    monkeypatch.setenv("SITE_TOKEN", "Bearer eyJhbGciOiJIUzI1NiJ9.s3cr3t")  # the token alone, no name
    assert run_audit("http://127.0.0.1:9/", "--allow-private", "--header-env", "SITE_TOKEN") == 2
    printed = capsys.readouterr()
    assert "SITE_TOKEN" in printed.err and "no ':' found" in printed.err
    assert "s3cr3t" not in printed.err + printed.out
    assert not Audit.objects.exists()


@pytest.mark.parametrize("env, args, message", [
    ({"STAGING_AUTH": "ann:pw", "SITE_AUTH": "Authorization: Bearer t"},
     ["--auth-basic-env", "STAGING_AUTH", "--header-env", "SITE_AUTH"], "not both"),
    ({**{f"H{n}": f"X-Extra-{n}: v" for n in range(21)}},
     [arg for n in range(21) for arg in ("--header-env", f"H{n}")], "At most 20 extra headers"),
    ({"STAGING_AUTH": "a" * 201 + ":pw"}, ["--auth-basic-env", "STAGING_AUTH"], "at most 200 characters"),
    ({"STAGING_AUTH": ":token-only"}, ["--auth-basic-env", "STAGING_AUTH"], "with a user name"),
    ({"STAGING_AUTH": "   :token-only"}, ["--auth-basic-env", "STAGING_AUTH"], "with a user name"),
    ({"STAGING_AUTH": "ann:"}, ["--auth-basic-env", "STAGING_AUTH"], "--auth-basic-env (password): Needed for basic auth."),
    ({"SITE_PASSWORD": "p" * 1001},
     ["--login-url", "http://127.0.0.1:9/login", "--login-success", "x", "--login-secret-field",
      "password=SITE_PASSWORD"], "at most 1000 characters"),
])
def test_the_command_takes_the_access_screens_bounds(env, args, message, monkeypatch, capsys, fast_settings):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert run_audit("http://127.0.0.1:9/", "--allow-private", *args) == 2
    printed = capsys.readouterr()
    assert message in printed.err
    assert "Bearer t" not in printed.err + printed.out
    assert not Audit.objects.exists()


# The access screen requires a user-name field, a password field and a password: without them the login
# would be saved, then fail at crawl time.
@pytest.mark.parametrize("args, messages", [
    ([], ["--login-field: Needed for a login.", "--login-secret-field: Needed for a login."]),
    (["--login-field", f"username={USER}"], ["--login-secret-field: Needed for a login."]),
    (["--login-secret-field", "password=SITE_PASSWORD"], ["--login-field: Needed for a login."]),
], ids=["neither", "no_password", "no_user_name"])
def test_a_login_the_access_screen_would_refuse_exits_2_with_its_messages_before_anything_is_stored_or_fetched(
        args, messages, monkeypatch, capsys, fast_settings):
    monkeypatch.setenv("SITE_PASSWORD", PASSWORD)
    with LoginSite() as site:
        code = run_audit(site.url("/"), "--allow-private", "--login-url", site.url("/login/"),
                         "--login-success", "Members", *args)
        assert site.log == []
    assert code == 2
    err = capsys.readouterr().err
    assert all(message in err for message in messages), err
    assert not Audit.objects.exists() and not SiteAccess.objects.exists()


def test_further_login_fields_are_saved_beside_the_screens_two_and_held_to_its_bounds(monkeypatch, capsys,
                                                                                      fast_settings):
    monkeypatch.setenv("SITE_PASSWORD", PASSWORD)
    monkeypatch.setenv("SITE_PIN", "1234")
    login = ["--login-url", "http://127.0.0.1:9/login", "--login-success", "x", "--login-field", f"username={USER}",
             "--login-secret-field", "password=SITE_PASSWORD", "--login-secret-field", "pin=SITE_PIN"]
    assert run_audit("http://127.0.0.1:9/", "--allow-private", *login, "--login-field", "x" * 101 + "=1") == 2
    assert "--login-field: Ensure this value has at most 100 characters" in capsys.readouterr().err
    assert not SiteAccess.objects.exists()
    assert run_audit("http://127.0.0.1:9/", "--allow-private", "--enqueue", *login, "--login-field", "lang=en") == 0
    access = SiteAccess.objects.get()
    assert access.login_fields == {"username": USER, "lang": "en"}
    assert access.login_secret_values() == {"password": PASSWORD, "pin": "1234"}


def test_the_basic_auth_user_is_stripped_of_spaces_as_the_access_screen_does(monkeypatch, fast_settings):
    monkeypatch.setenv("STAGING_AUTH", f"  {USER} :{PASSWORD}")
    assert run_audit("http://127.0.0.1:9/", "--allow-private", "--enqueue", "--auth-basic-env", "STAGING_AUTH") == 0
    assert SiteAccess.objects.get().basic_user == USER


def test_an_authorization_header_beside_stored_basic_auth_is_refused_and_leaves_no_audit(
        monkeypatch, capsys, fast_settings):
    # Sent together they would be two Authorization headers on every request.
    monkeypatch.setenv("STAGING_AUTH", "ann:pw")
    monkeypatch.setenv("SITE_AUTH", "Authorization: Bearer t")
    start = "http://127.0.0.1:9/"
    assert run_audit(start, "--allow-private", "--enqueue", "--auth-basic-env", "STAGING_AUTH") == 0
    assert SiteAccess.objects.get().has_basic
    assert run_audit(start, "--allow-private", "--no-external", "--header-env", "SITE_AUTH") == 2
    assert "basic auth and an Authorization header" in capsys.readouterr().err
    assert Audit.objects.count() == 1 and SiteAccess.objects.get().header_names == []


def test_a_logout_pattern_given_with_a_session_cookie_header_is_the_sites(monkeypatch, fast_settings):
    """A session in a Cookie header ends at the logout as a login's does."""
    monkeypatch.setenv("SITE_COOKIE", "Cookie: sessionid=abc")
    start = "http://127.0.0.1:9/"
    assert run_audit(start, "--allow-private", "--enqueue", "--header-env", "SITE_COOKIE",
                     "--logout-pattern", "/bye") == 0
    assert SiteAccess.objects.get().logout_pattern == "/bye"


LOGIN = ["--login-url", "http://127.0.0.1:9/login", "--login-success", "x", "--login-field", f"username={USER}"]


@pytest.mark.parametrize("args, secret, message", [
    (["--auth-basic-env", "ann:hunter2"], "hunter2", "VAR must be the name of an environment variable"),
    (["--header-env", "Authorization: Bearer abc123xyz"], "abc123xyz",
     "VAR must be the name of an environment variable"),
    ([*LOGIN, "--login-secret-field", "password=hunter2!"], "hunter2",
     "the part after '=' must be the name of an environment variable"),
    # A base64 secret alone parses as NAME=VAR ("c2VjcmV0cGFzcw" = ""): neither part is quoted.
    ([*LOGIN, "--login-secret-field", "c2VjcmV0cGFzcw=="], "c2VjcmV0", "not the secret itself"),
    ([*LOGIN, "--login-secret-field", "hunter2"], "hunter2", "--login-secret-field takes NAME=VAR."),
    # Valid names that no variable has: one not in capitals may be the secret, so it is not repeated.
    ([*LOGIN, "--login-secret-field", "password=hunter2"], "hunter2", "the environment variable it names is not set"),
    (["--header-env", "abc123xyz"], "abc123xyz", "the environment variable it names is not set"),
], ids=["basic_pair", "header_line", "secret_with_punctuation", "bare_base64", "secret_without_name",
        "lower_case_unset", "lower_case_header_unset"])
def test_a_secret_given_where_a_variable_name_belongs_exits_2_without_printing_it(
        args, secret, message, capsys, fast_settings):
    code = run_audit("http://127.0.0.1:9/", "--allow-private", *args)
    printed = capsys.readouterr()
    assert code == 2
    assert message in printed.err, printed.err
    assert secret not in printed.err + printed.out  # run_audit writes the CommandError's message to stderr
    assert not Audit.objects.exists() and not SiteAccess.objects.exists()

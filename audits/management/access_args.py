"""The audit command's options for private sites: secrets come from environment variables, never argv.

A secret on the command line shows in ``ps`` and in shell history, so every
secret option names a variable that holds it. What the options describe is
saved, sealed, as the site's access (as the access screen does), so a worker
cluster handed the audit with --enqueue crawls with it too.
"""

from __future__ import annotations

import os

from django.core.management.base import CommandError

from crawler.credentials import LOGOUT_DEFAULT, basic_header, headers_problem, login_page_problem
from crawler.urls import compile_patterns

from ..models import Site, SiteAccess
from ..site_access_forms import SiteAccessForm


def add_access_arguments(parser) -> None:
    group = parser.add_argument_group("private sites (secrets are read from environment variables)")
    group.add_argument("--auth-basic-env", metavar="VAR", help="HTTP basic auth: VAR holds user:password")
    group.add_argument("--header-env", metavar="VAR", action="append", default=[],
                       help="An extra request header: VAR holds 'Name: value' (repeatable)")
    group.add_argument("--login-url", help="The page with the login form (on the audited site)")
    group.add_argument("--login-field", metavar="NAME=VALUE", action="append", default=[],
                       help="A login form field that is not secret, e.g. username=ann (repeatable)")
    group.add_argument("--login-secret-field", metavar="NAME=VAR", action="append", default=[],
                       help="A secret login form field whose value VAR holds, e.g. password=SITE_PASSWORD")
    group.add_argument("--login-success", metavar="REGEX", help="The page after logging in matches this")
    group.add_argument("--logout-pattern", metavar="REGEX", default=LOGOUT_DEFAULT,
                       help=f"URLs never followed while logged in (default: {LOGOUT_DEFAULT})")


def _env(name: str, option: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise CommandError(f"{option}: the environment variable {name} is not set or empty.", returncode=2)
    return value


def _pair(text: str, option: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise CommandError(f"{option} takes NAME=VALUE; got {text.split('=')[0][:40]!r}.", returncode=2)
    return name.strip(), value


def _within(text: str, field: str, option: str) -> str:
    """``text``, once it is within the access form's bound for ``field``: the screen and the command take the same."""
    limit = SiteAccessForm.base_fields[field].max_length
    if len(text) > limit:
        raise CommandError(f"{option}: at most {limit} characters.", returncode=2)
    return text


def access_from_options(opts: dict, start_url: str) -> dict | None:
    """The access the options describe (checked, secrets read), or None when they describe none."""
    access: dict = {}
    if opts.get("auth_basic_env"):
        user, sep, password = _env(opts["auth_basic_env"], "--auth-basic-env").partition(":")
        _within(user, "basic_user", "--auth-basic-env (user)")
        _within(password, "basic_password", "--auth-basic-env (password)")
        try:
            basic_header(user, password)
        except ValueError as exc:
            raise CommandError(f"--auth-basic-env: {exc}", returncode=2) from None
        if not sep or not user:
            # An empty user name would be no basic auth at all, and the crawl would go on as anyone.
            raise CommandError("--auth-basic-env: the variable must hold user:password, with a user name.",
                               returncode=2)
        access["basic"] = (user, password)
    lines = []
    for name in opts.get("header_env") or []:
        line = _env(name, "--header-env").strip()
        if problem := headers_problem([line]):  # the message names the header, never its value
            raise CommandError(f"--header-env {name}: {problem}", returncode=2)
        lines.append(line)
    if problem := headers_problem(lines, basic="basic" in access):
        raise CommandError(f"--header-env: {problem}", returncode=2)
    if lines:
        access["headers"] = lines
    if opts.get("login_url"):
        access["login"] = _login(opts, start_url)
    elif opts.get("login_field") or opts.get("login_secret_field") or opts.get("login_success"):
        raise CommandError("--login-field, --login-secret-field and --login-success need --login-url.", returncode=2)
    elif access and opts.get("logout_pattern") != LOGOUT_DEFAULT:
        # A session in a Cookie header ends at the logout as a login's does.
        access["logout"] = _logout_pattern(opts)
    if not access and opts.get("logout_pattern") not in (None, LOGOUT_DEFAULT):
        raise CommandError("--logout-pattern needs --auth-basic-env, --header-env or --login-url: it says what a "
                           "private site's crawl never requests.", returncode=2)
    return access or None


def _logout_pattern(opts: dict) -> str:
    pattern = _within(opts.get("logout_pattern") or "", "logout_pattern", "--logout-pattern")
    try:
        compile_patterns([pattern])
    except ValueError as exc:
        raise CommandError(f"--logout-pattern: {exc}", returncode=2) from None
    return pattern


def _login(opts: dict, start_url: str) -> dict:
    url = _within(opts["login_url"], "login_url", "--login-url")
    if problem := login_page_problem(url, start_url):
        raise CommandError(f"--login-url: {problem}", returncode=2)
    if not opts.get("login_success"):
        raise CommandError("--login-url needs --login-success, a pattern the page after logging in matches.",
                           returncode=2)
    _within(opts["login_success"], "login_success", "--login-success")
    try:
        compile_patterns([opts["login_success"]])
    except ValueError as exc:
        raise CommandError(f"--login-success: {exc}", returncode=2) from None
    logout = _logout_pattern(opts)
    fields = {_within(name, "login_user_field", "--login-field (name)"): _within(value, "login_user", "--login-field")
              for name, value in (_pair(text, "--login-field") for text in opts.get("login_field") or [])}
    secrets = {_within(name, "login_password_field", "--login-secret-field (name)"):
               _within(_env(var, "--login-secret-field"), "login_password", f"--login-secret-field {var}")
               for name, var in (_pair(text, "--login-secret-field") for text in opts.get("login_secret_field") or [])}
    return {"url": url, "fields": fields, "secrets": secrets, "success": opts["login_success"],
            "logout": logout}


def save_access(site: Site, access: dict) -> SiteAccess:
    """Store ``access`` as the site's (sealed), replacing what the options cover.

    CommandError when what is kept and what is new would send two Authorization
    headers: basic auth stored and an Authorization header given, or the reverse.
    """
    row = SiteAccess.objects.filter(site=site).first() or SiteAccess(site=site)
    basic = "basic" in access or row.has_basic
    names = [line.partition(":")[0] for line in access["headers"]] if "headers" in access else row.header_names
    if basic and any(name.strip().lower() == "authorization" for name in names):
        raise CommandError("The site would get basic auth and an Authorization header: use one "
                           "(the access screen removes the stored one).", returncode=2)
    if "basic" in access:
        row.set_basic(*access["basic"])
    if "headers" in access:
        row.set_headers(access["headers"])
    if "login" in access:
        login = access["login"]
        row.set_login(login["url"], login["fields"], login["secrets"], login["success"])
        row.logout_pattern = login["logout"]
    elif "logout" in access:
        row.logout_pattern = access["logout"]
    row.save()
    return row

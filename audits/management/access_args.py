"""The audit command's options for private sites: secrets come from environment variables, never argv.

A secret on the command line shows in ``ps`` and in shell history, so every
secret option names a variable that holds it. What the options describe is
saved, sealed, as the site's access (as the access screen does), so a worker
cluster handed the audit with --enqueue crawls with it too.
"""

from __future__ import annotations

import os
import re

from django import forms
from django.core.management.base import CommandError

from crawler.credentials import LOGOUT_DEFAULT, basic_header, headers_problem

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


# What names a variable (POSIX: letters, digits and _, not starting with a digit). Anything else given
# where a name belongs is most likely the secret itself, so the messages never quote it.
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Names are not secret, but "hunter2" is a valid one: only a name written the usual way (capitals) is quoted.
_USUAL_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
NOT_A_NAME = "must be the name of an environment variable (letters, digits and _, not starting with a digit)"


def _env(name: str, option: str, refusal: str) -> str:
    """The value of the environment variable ``name`` that ``option`` gave; exits 2 with ``refusal`` when
    ``name`` is no variable's name, and without quoting a name that might be a secret when it is unset."""
    if not _VAR_NAME.fullmatch(name):
        raise CommandError(refusal, returncode=2)
    value = os.environ.get(name)
    if not value:
        if _USUAL_NAME.fullmatch(name):
            raise CommandError(f"{option}: the environment variable {name} is not set or empty.", returncode=2)
        raise CommandError(f"{option}: the environment variable it names is not set or empty (the name is not "
                           "repeated: not in capitals, it may be the secret itself).", returncode=2)
    return value


def _pair(text: str, option: str, *, secret: bool = False) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        # A secret field's argument without "=" may be the secret alone: it is not quoted.
        got = "" if secret else f"; got {text.split('=')[0][:40]!r}"
        raise CommandError(f"{option} takes NAME={'VAR' if secret else 'VALUE'}{got}.", returncode=2)
    return name.strip(), value


# The access screen's fields as the command line gives them, for the form's messages.
OPTION_NAMES = {
    "basic_user": "--auth-basic-env (user)", "basic_password": "--auth-basic-env (password)",
    "headers": "--header-env", "login_url": "--login-url", "login_user_field": "--login-field",
    "login_user": "--login-field", "login_password_field": "--login-secret-field",
    "login_password": "--login-secret-field", "login_success": "--login-success",
    "logout_pattern": "--logout-pattern", "__all__": "options",
}


def _cleaned(value: str, field: str, option: str) -> str:
    """``value`` as the access form's ``field`` cleans it (its bound, spaces stripped); exits 2 with its message."""
    try:
        return SiteAccessForm.base_fields[field].clean(value)
    except forms.ValidationError as exc:
        raise CommandError(f"{option}: {' '.join(exc.messages)}", returncode=2) from None


def _checked(data: dict, start_url: str) -> dict:
    """The access screen's form's cleaned ``data``, checked as a site's first access; exits 2 with its messages."""
    form = SiteAccessForm(data, access=SiteAccess(), start_url=start_url)
    if form.is_valid():
        return form.cleaned_data
    problems = []
    for field, errors in form.errors.as_data().items():
        for error in errors:
            line = f"{OPTION_NAMES.get(field, field)}: {' '.join(error.messages)}"
            # The screen's note that a typed secret is never shown again is no news on a command line.
            if error.code != "retype" and line not in problems:
                problems.append(line)
    raise CommandError("Cannot audit with these options:\n  " + "\n  ".join(problems), returncode=2)


def access_from_options(opts: dict, start_url: str) -> dict | None:
    """The access the options describe (checked, secrets read), or None when they describe none.

    The access screen's form checks it, so the command takes what the screen
    takes. It checks it as a site's first access: the command replaces each kind
    it gives whole, so a login must be complete without the stored one's secrets.
    """
    data: dict = {}
    if opts.get("auth_basic_env"):
        user, sep, password = _env(opts["auth_basic_env"], "--auth-basic-env",
                                   f"--auth-basic-env VAR: VAR {NOT_A_NAME} that holds user:password, "
                                   "not the secret itself.").partition(":")
        if not sep or not user.strip():
            # An empty user name would be no basic auth at all, and the crawl would go on as anyone.
            raise CommandError("--auth-basic-env: the variable must hold user:password, with a user name.",
                               returncode=2)
        data.update(basic_user=user, basic_password=password)
    lines = []
    for name in opts.get("header_env") or []:
        line = _env(name, "--header-env", f"--header-env VAR: VAR {NOT_A_NAME} that holds 'Name: value', "
                                          "not the header itself.").strip()
        if problem := headers_problem([line]):  # the message names the header, never its value
            raise CommandError(f"--header-env {name}: {problem}", returncode=2)
        lines.append(line)
    data["headers"] = "\n".join(lines)
    fields, secrets = [], []
    if opts.get("login_url"):
        fields = [_pair(text, "--login-field") for text in opts.get("login_field") or []]
        # The field's name is not quoted either: a bare base64 secret ("c2VjcmV0=") parses as NAME=VAR.
        secrets = [(name, _env(var, "--login-secret-field",
                               f"--login-secret-field NAME=VAR: the part after '=' {NOT_A_NAME} that holds the "
                               "field's value, not the secret itself."))
                   for name, var in (_pair(text, "--login-secret-field", secret=True)
                                     for text in opts.get("login_secret_field") or [])]
        data.update(login_url=opts["login_url"], login_success=opts.get("login_success") or "")
        if fields:
            data.update(login_user_field=fields[0][0], login_user=fields[0][1])
        if secrets:
            data.update(login_password_field=secrets[0][0], login_password=secrets[0][1])
    elif opts.get("login_field") or opts.get("login_secret_field") or opts.get("login_success"):
        raise CommandError("--login-field, --login-secret-field and --login-success need --login-url.", returncode=2)
    if not data.get("basic_user") and not lines and not opts.get("login_url"):
        if opts.get("logout_pattern") not in (None, LOGOUT_DEFAULT):
            raise CommandError("--logout-pattern needs --auth-basic-env, --header-env or --login-url: it says "
                               "what a private site's crawl never requests.", returncode=2)
        return None
    data["logout_pattern"] = opts.get("logout_pattern") or ""
    cleaned = _checked(data, start_url)
    access: dict = {}
    if cleaned["basic_user"]:
        try:
            basic_header(cleaned["basic_user"], cleaned["basic_password"])  # a secret the request cannot carry
        except ValueError as exc:
            raise CommandError(f"--auth-basic-env: {exc}", returncode=2) from None
        access["basic"] = (cleaned["basic_user"], cleaned["basic_password"])
    if cleaned["headers"]:
        access["headers"] = cleaned["headers"]
    if cleaned["login_url"]:
        # The screen's form holds one plain field and one secret; the command's further ones get its bounds.
        access["login"] = {
            "url": cleaned["login_url"], "success": cleaned["login_success"], "logout": cleaned["logout_pattern"],
            "fields": {cleaned["login_user_field"]: cleaned["login_user"],
                       **{_cleaned(name, "login_user_field", "--login-field"):
                          _cleaned(value, "login_user", "--login-field") for name, value in fields[1:]}},
            "secrets": {cleaned["login_password_field"]: cleaned["login_password"],
                        **{_cleaned(name, "login_password_field", "--login-secret-field"):
                           _cleaned(value, "login_password", "--login-secret-field") for name, value in secrets[1:]}},
        }
    elif opts.get("logout_pattern") != LOGOUT_DEFAULT:
        # A session in a Cookie header ends at the logout as a login's does.
        access["logout"] = cleaned["logout_pattern"]
    return access


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

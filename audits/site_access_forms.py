"""The form for how the crawler gets into a private site.

Secrets are write-only: the form never renders a stored value, nor a posted one
(header lines carry tokens), an empty secret field keeps what is stored, and
each kind has a "clear" box. The login page must be on the site's own origin,
since credentials never leave it.
"""

from __future__ import annotations

from django import forms

from crawler.credentials import basic_header, headers_problem, login_page_problem
from crawler.urls import compile_patterns

from .address_input import URLAddressInput
from .models.site_access import SiteAccess

SECRET = forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value, even the one just posted: header lines carry tokens."""

    def format_value(self, value):
        return None


UNREADABLE = "Stored, but unreadable since the key changed: set it again (or remove it)."
RETYPE = "Nothing was saved, and secrets are never shown again, not even this one: type it again."
# The fields a login is made of besides its page's address.
LOGIN_PARTS = ("login_user_field", "login_user", "login_password_field", "login_password", "login_success")


class SiteAccessForm(forms.Form):
    basic_user = forms.CharField(label="Basic-auth user", required=False, max_length=200)
    basic_password = forms.CharField(label="Basic-auth password", required=False, widget=SECRET, max_length=1000)
    clear_basic = forms.BooleanField(label="Remove basic auth", required=False)
    headers = forms.CharField(
        label="Extra request headers", required=False, max_length=8000,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text="One 'Name: value' a line, e.g. Authorization: Bearer … or Cookie: session=…. "
                  "Leave empty to keep the stored headers.")
    clear_headers = forms.BooleanField(label="Remove the extra headers", required=False)
    login_url = forms.URLField(label="Login page", required=False, max_length=2048, assume_scheme="https",
                               widget=URLAddressInput())
    login_user_field = forms.CharField(label="User name field", required=False, max_length=100,
                                       help_text="The form field's name, e.g. username")
    login_user = forms.CharField(label="User name", required=False, max_length=300)
    login_password_field = forms.CharField(label="Password field", required=False, max_length=100,
                                           help_text="The form field's name, e.g. password")
    login_password = forms.CharField(label="Password", required=False, widget=SECRET, max_length=1000)
    login_success = forms.CharField(label="Success pattern", required=False, max_length=500,
                                    help_text="A regular expression the page after logging in matches, "
                                              "e.g. Log out|My account")
    clear_login = forms.BooleanField(label="Remove the login", required=False)
    logout_pattern = forms.CharField(label="Never follow URLs matching", required=False, max_length=500,
                                     help_text="Logout links end the session the crawl runs on.")

    def __init__(self, *args, access: SiteAccess, start_url: str, **kwargs):
        self.access, self.start_url = access, start_url
        # Secrets sealed under a key that has changed since count as not set, so
        # the form asks for them again rather than failing to keep them.
        self.stored_secrets = access.login_secret_values() if access.login_readable else {}
        initial = {"basic_user": access.basic_user, "login_url": access.login_url,
                   "login_success": access.login_success, "logout_pattern": access.logout_pattern}
        # The screen shows one plain field and one secret field's name (names are
        # not secret), the first by name: PostgreSQL's jsonb keeps no key order.
        # Further fields, saved from the command line, are kept by save().
        if access.login_fields:
            name = min(access.login_fields)
            initial["login_user_field"], initial["login_user"] = name, access.login_fields[name]
        if self.stored_secrets:
            initial["login_password_field"] = min(self.stored_secrets)
        super().__init__(*args, initial=initial, **kwargs)

    def clean_basic_user(self) -> str:
        user = self.cleaned_data["basic_user"].strip()
        try:
            basic_header(user, "")
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="user") from None
        return user

    def clean_headers(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["headers"].splitlines() if line.strip()]
        if problem := headers_problem(lines):
            raise forms.ValidationError(problem, code="header")
        return lines

    def _pattern(self, name: str) -> str:
        pattern = self.cleaned_data[name].strip()
        try:
            compile_patterns([pattern])
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="pattern") from None
        return pattern

    def clean_login_success(self) -> str:
        return self._pattern("login_success")

    def clean_logout_pattern(self) -> str:
        return self._pattern("logout_pattern")

    def clean_login_url(self) -> str:
        url = self.cleaned_data["login_url"].strip()
        if url and (problem := login_page_problem(url, self.start_url)):
            raise forms.ValidationError(problem, code="origin")
        return url

    def clean(self):
        data = super().clean()
        basic = bool(data.get("basic_user") or self.access.has_basic) and not data.get("clear_basic")
        # An empty headers box keeps the stored headers: they go out beside the basic auth too.
        headers = data.get("headers") or []
        if not headers and not data.get("clear_headers") and self.access.headers_readable:
            headers = self.access.header_lines()
        if basic and (problem := headers_problem(headers, basic=True)):
            self.add_error("headers", forms.ValidationError(problem, code="authorization"))
        if data.get("basic_password") and not data.get("basic_user"):
            self.add_error("basic_user", forms.ValidationError("A password needs a user name.", code="required"))
        if (data.get("basic_user") and not data.get("basic_password") and not data.get("clear_basic")
                and not self.access.basic_readable):
            self.add_error("basic_password", forms.ValidationError(UNREADABLE, code="unreadable"))
        if (self.access.headers and not self.access.headers_readable and not data.get("headers")
                and not data.get("clear_headers")):
            self.add_error("headers", forms.ValidationError(UNREADABLE, code="unreadable"))
        if data.get("login_url") and not data.get("clear_login"):
            for field in ("login_user_field", "login_password_field", "login_success"):
                if not data.get(field):
                    self.add_error(field, forms.ValidationError("Needed for a login.", code="required"))
            if not data.get("login_password") and not self.stored_secrets:
                self.add_error("login_password", forms.ValidationError("Needed for a login.", code="required"))
        elif not data.get("clear_login") and any(data.get(name) for name in LOGIN_PARTS) and "login_url" not in self.errors:
            self.add_error("login_url", forms.ValidationError(
                "A login needs its page's address; to keep no login, leave the login fields empty.", code="required"))
        if data.get("basic_user") and not data.get("basic_password") and not self.access.has_basic:
            self.add_error("basic_password", forms.ValidationError("Needed for basic auth.", code="required"))
        if self.errors:
            # Secrets are never rendered back, not even the ones just posted: say so where one was typed,
            # or an empty box on the next save would keep the stored value and drop the typed one unseen.
            for name in ("basic_password", "headers", "login_password"):
                if self.data.get(self.add_prefix(name), "").strip() and name not in self.errors:
                    self.add_error(name, forms.ValidationError(RETYPE, code="retype"))
        return data

    def save(self) -> SiteAccess:
        data, access = self.cleaned_data, self.access
        if data["clear_basic"]:
            access.clear(basic=True)
        elif data["basic_user"]:
            keep = access.basic_password if not data["basic_password"] else None
            access.set_basic(data["basic_user"], data["basic_password"])
            if keep is not None:
                access.basic_password = keep
        if data["clear_headers"]:
            access.clear(headers=True)
        elif data["headers"]:
            access.set_headers(data["headers"])
        if data["clear_login"]:
            access.clear(login=True)
        elif data["login_url"]:
            # The fields the screen showed are replaced by what was posted; the others stay.
            shown_field, shown_secret = self.initial.get("login_user_field"), self.initial.get("login_password_field")
            fields = {name: value for name, value in access.login_fields.items() if name != shown_field}
            fields[data["login_user_field"]] = data["login_user"]
            secrets = {name: value for name, value in self.stored_secrets.items() if name != shown_secret}
            # An empty password field keeps the stored one, under the field named now.
            secrets[data["login_password_field"]] = data["login_password"] or self.stored_secrets.get(shown_secret, "")
            access.set_login(data["login_url"], fields, secrets, data["login_success"])
        access.logout_pattern = data["logout_pattern"]
        access.save()
        return access

"""The form for how the crawler gets into a private site.

Secrets are write-only: the form never renders a stored value, an empty secret
field keeps what is stored, and each kind has a "clear" box. The login page
must be on the site's own origin, since credentials never leave it.
"""

from __future__ import annotations

from django import forms

from crawler.credentials import MAX_HEADERS, basic_header, login_page_problem, parse_header
from crawler.urls import compile_patterns

from .models.site_access import SiteAccess

SECRET = forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})


class SiteAccessForm(forms.Form):
    basic_user = forms.CharField(label="Basic-auth user", required=False, max_length=200)
    basic_password = forms.CharField(label="Basic-auth password", required=False, widget=SECRET, max_length=1000)
    clear_basic = forms.BooleanField(label="Remove basic auth", required=False)
    headers = forms.CharField(
        label="Extra request headers", required=False, max_length=8000,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text="One 'Name: value' a line, e.g. Authorization: Bearer … or Cookie: session=…. "
                  "Leave empty to keep the stored headers.")
    clear_headers = forms.BooleanField(label="Remove the extra headers", required=False)
    login_url = forms.URLField(label="Login page", required=False, max_length=2048, assume_scheme="https")
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
        initial = {"basic_user": access.basic_user, "login_url": access.login_url,
                   "login_success": access.login_success, "logout_pattern": access.logout_pattern}
        fields = dict(access.login_fields)
        if len(fields) == 1:
            initial["login_user_field"], initial["login_user"] = next(iter(fields.items()))
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
        if len(lines) > MAX_HEADERS:
            raise forms.ValidationError(f"At most {MAX_HEADERS} headers.", code="count")
        for line in lines:
            try:
                parse_header(line)
            except ValueError as exc:
                raise forms.ValidationError(str(exc), code="header") from None
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
        basic = (data.get("basic_user") or self.access.has_basic) and not data.get("clear_basic")
        header_names = [line.partition(":")[0].strip().lower() for line in data.get("headers") or []]
        if basic and "authorization" in header_names:
            self.add_error("headers", forms.ValidationError(
                "Use either basic auth or an Authorization header, not both.", code="authorization"))
        if data.get("basic_password") and not data.get("basic_user"):
            self.add_error("basic_user", forms.ValidationError("A password needs a user name.", code="required"))
        if data.get("login_url") and not data.get("clear_login"):
            for field in ("login_user_field", "login_password_field", "login_success"):
                if not data.get(field):
                    self.add_error(field, forms.ValidationError("Needed for a login.", code="required"))
            if not data.get("login_password") and not self.access.login_secrets:
                self.add_error("login_password", forms.ValidationError("Needed for a login.", code="required"))
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
            password = data["login_password"]
            if not password:  # an empty password field keeps the stored one, under the field named now
                stored = list(access.login_secret_values().values())
                password = stored[0] if stored else ""
            access.set_login(data["login_url"], {data["login_user_field"]: data["login_user"]},
                             {data["login_password_field"]: password}, data["login_success"])
        access.logout_pattern = data["logout_pattern"]
        access.save()
        return access

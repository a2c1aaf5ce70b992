"""How the crawler gets into a private site: basic auth, extra headers, a login form.

Secrets (the password, header values, the login form's secret fields) are stored
sealed (``audits.secrets``) and never rendered again: forms and the admin show
"set" or "not set". They go to the site's own origin only (``crawler.credentials``).
"""

from __future__ import annotations

import json

from django.db import models

from crawler.credentials import LOGOUT_DEFAULT, Credentials, LoginForm

from ..secrets import fingerprint, readable, seal, unseal
from .site import Site


class SiteAccess(models.Model):
    site = models.OneToOneField(Site, on_delete=models.CASCADE, related_name="access")
    basic_user = models.CharField(max_length=200, blank=True)
    basic_password = models.TextField(blank=True, help_text="Sealed")
    headers = models.TextField(blank=True, help_text="Sealed; one 'Name: value' a line")
    login_url = models.URLField(max_length=2048, blank=True)
    login_fields = models.JSONField(default=dict, blank=True, help_text="Plain fields, e.g. the user name")
    login_secrets = models.TextField(blank=True, help_text="Sealed JSON of the secret fields")
    login_success = models.CharField(max_length=500, blank=True, help_text="A regex the page after login matches")
    logout_pattern = models.CharField(max_length=500, default=LOGOUT_DEFAULT, blank=True,
                                      help_text="URLs matching this are never followed")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "site access"
        verbose_name_plural = "site access"

    def __str__(self):
        return f"access to {self.site}"

    # --- what is set (never the values) ------------------------------------------

    @property
    def has_basic(self) -> bool:
        return bool(self.basic_user)

    @property
    def header_names(self) -> list[str]:
        if not self.headers_readable:
            return []
        return [line.partition(":")[0].strip() for line in self.header_lines()]

    # After SECRET_KEY or SITEWARD_FIELD_KEY changes, stored secrets no longer
    # decrypt: the screens say so (and ask for them again) instead of failing.

    @property
    def basic_readable(self) -> bool:
        return readable(self.basic_password)

    @property
    def headers_readable(self) -> bool:
        return readable(self.headers)

    @property
    def login_readable(self) -> bool:
        return readable(self.login_secrets)

    @property
    def has_login(self) -> bool:
        return bool(self.login_url)

    @property
    def is_set(self) -> bool:
        return self.has_basic or bool(self.headers) or self.has_login

    # --- state changes -------------------------------------------------------------

    def set_basic(self, user: str, password: str) -> None:
        self.basic_user, self.basic_password = user, seal(password)

    def set_headers(self, lines: list[str]) -> None:
        self.headers = seal("\n".join(line.strip() for line in lines if line.strip()))

    def set_login(self, url: str, fields: dict[str, str], secret_fields: dict[str, str], success: str) -> None:
        self.login_url, self.login_fields, self.login_success = url, dict(fields), success
        self.login_secrets = seal(json.dumps(secret_fields)) if secret_fields else ""

    def clear(self, *, basic: bool = False, headers: bool = False, login: bool = False) -> None:
        if basic:
            self.basic_user = self.basic_password = ""
        if headers:
            self.headers = ""
        if login:
            self.login_url, self.login_fields, self.login_secrets, self.login_success = "", {}, "", ""

    # --- what the crawl uses -------------------------------------------------------

    def header_lines(self) -> list[str]:
        return [line for line in unseal(self.headers).splitlines() if line.strip()]

    def identity(self) -> str:
        """Who a crawl with this access is to the site (a keyed digest, never the secrets).

        The user name, the headers and the login's fields, not the passwords: a
        new password for the same account sees the same pages.
        """
        who = [self.basic_user, self.header_lines(), self.login_url, sorted(self.login_fields.items())]
        return fingerprint(json.dumps(who))

    def credentials(self, start_url: str, cookies: dict[str, str] | None = None) -> Credentials | None:
        basic = (self.basic_user, unseal(self.basic_password)) if self.basic_user else None
        return Credentials.for_site(start_url, basic=basic, headers=self.header_lines(), cookies=cookies)

    def login_secret_values(self) -> dict[str, str]:
        return json.loads(unseal(self.login_secrets)) if self.login_secrets else {}

    def login_form(self) -> LoginForm | None:
        if not self.login_url:
            return None
        fields = {**self.login_fields, **self.login_secret_values()}
        return LoginForm(self.login_url, tuple(fields.items()), self.login_success)


class AuditSession(models.Model):
    """One audit's login session: its cookies (sealed) and how many logins it has made."""

    audit = models.OneToOneField("audits.Audit", on_delete=models.CASCADE, related_name="session")
    cookies = models.TextField(blank=True, help_text="Sealed JSON of the session cookies")
    logins = models.PositiveSmallIntegerField(default=0)
    # Sealed too: a cookieless session's URL carries its id.
    landing = models.TextField(blank=True, help_text="Sealed URL of the page the last login ended on")

    def __str__(self):
        return f"session of audit {self.audit_id}"

"""Cookies marked Secure, or named __Secure- / __Host-, as browsers take them (RFC 6265bis 5.7): never
from a plain-http answer, so never sent back in cleartext; over https kept when their attributes fit."""

from __future__ import annotations

import httpx

from crawler.cookies import read_cookies
from crawler.credentials import Credentials
from crawler.login import log_in
from tests.crawler.test_login import form, run
from tests.login_site import LoginSite

SECURE_ONLY = ("s=1; Secure; Path=/", "__Host-h=1; Secure; Path=/", "__Secure-q=1; Secure")


class SecureCookieLoginSite(LoginSite):
    """An http site whose login page also sets cookies only an https answer may set."""

    def _login(self, request):
        response = super()._login(request)
        if request.method == "GET":
            for line in SECURE_ONLY:
                response.headers.add("Set-Cookie", line)
        return response


def test_a_secure_cookie_set_over_plain_http_is_never_sent_back():
    with SecureCookieLoginSite() as site:
        cookies = run(site, lambda f: log_in(f, form(site))).cookies
        assert set(cookies) == {"csrftoken", "sessionid"}
        posted = [headers["Cookie"] for method, _, headers in site.log if method == "POST"]
        assert [part.partition("=")[0] for part in posted[0].split("; ")] == ["csrftoken"]


def test_secure_and_prefixed_cookies_over_https_are_kept_when_their_attributes_fit():
    jar: dict[str, str] = {}
    read_cookies(jar, (
        *SECURE_ONLY,
        "__secure-lower=1; SECURE",  # the prefix and the attribute, whatever their case
        "__Secure-bare=1",  # the prefix without Secure
        "__Host-deep=1; Secure; Path=/account",  # __Host- must be Path=/ ...
        "__Host-shared=1; Secure; Path=/; Domain=x.test",  # ... and host-only
        "__Host-nopath=1; Secure",
    ), secure=True)
    assert jar == {"s": "1", "__Host-h": "1", "__Secure-q": "1", "__secure-lower": "1"}


def test_credentials_renewed_over_plain_http_take_no_secure_cookie_whoever_calls():
    http = Credentials.for_site("http://127.0.0.1:8000/", cookies={"sessionid": "old"})
    home = httpx.URL("http://127.0.0.1:8000/app/")
    assert http.renewed_by(home, ["sessionid=new; Secure", "__Host-h=1; Path=/"]) is http
    https = Credentials.for_site("https://127.0.0.1:8443/", cookies={"sessionid": "old"})
    renewed = https.renewed_by(httpx.URL("https://127.0.0.1:8443/app/"), ["sessionid=new; Secure"])
    assert dict(renewed.session) == {"sessionid": "new"}

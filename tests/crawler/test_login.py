"""Logging in through a site's form: cookies kept across hops, a failed login said in words."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from werkzeug.wrappers import Request, Response

from crawler.cookies import read_cookies
from crawler.credentials import Credentials, LoginForm
from crawler.fetch import Fetcher, FetchPolicy
from crawler.login import LoginFailed, is_login_redirect, log_in
from crawler.net import AddressGuard
from crawler.types import FetchResult, Hop
from tests.crawler.hostile_server import HostileServer
from tests.login_site import PASSWORD, USER, LoginSite, RequestLog
from tests.loopback import Loopback

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=2.0, deadline=5.0)


def run(site: LoginSite, work, *ports: int, credentials: Credentials | None = None):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", site.server.port), *[("127.0.0.1", p) for p in ports]])

    async def go():
        async with Fetcher(POLICY, guard, credentials=credentials) as fetcher:
            return await work(fetcher)

    return asyncio.run(go())


def form(site: LoginSite, password: str = PASSWORD, success: str = r"Members") -> LoginForm:
    return LoginForm(site.url("/login/"), (("username", USER), ("password", password)), success)


def test_a_form_login_returns_the_session_cookie_that_opens_the_members_pages():
    with LoginSite() as site:
        cookies = run(site, lambda f: log_in(f, form(site))).cookies
        assert set(cookies) == {"csrftoken", "sessionid"}
        creds = Credentials.for_site(site.url("/"), cookies=cookies)
        result = run(site, lambda f: f.fetch(site.url("/account/1/")), credentials=creds)
        assert result.status == 200 and b"Members /account/1/" in result.body


def test_a_login_form_whose_site_requires_its_submit_buttons_name_gets_in():
    """Pressing Enter sends the form's first submit button too; a plain ``type=button`` input is never sent."""
    with LoginSite(button="login") as site:
        cookies = run(site, lambda f: log_in(f, form(site))).cookies
        assert "sessionid" in cookies and site.logins == 1


def test_a_login_form_without_method_post_is_sent_as_a_get_and_a_failure_never_shows_the_password():
    with LoginSite(form_method="get") as site:
        assert "sessionid" in run(site, lambda f: log_in(f, form(site))).cookies
        assert [m for m, path, _ in site.log if path.startswith("/login/?")] == ["GET"]
        with pytest.raises(LoginFailed, match="sent as a GET") as failed:
            run(site, lambda f: log_in(f, form(site, password="wr0ng-secret")))
        assert "wr0ng-secret" not in str(failed.value) and USER not in str(failed.value)


def test_a_wrong_password_fails_the_login_with_a_reason_a_person_can_act_on():
    with LoginSite() as site, pytest.raises(LoginFailed, match="success pattern"):
        run(site, lambda f: log_in(f, form(site, password="wrong")))


def test_a_login_that_redirects_off_the_site_fails_and_sends_nothing_there():
    with LoginSite() as site, RequestLog() as elsewhere:
        site.server.clear()
        site.server.expect_request("/login/").respond_with_data(
            "", status=302, headers={"Location": elsewhere.url("/steal")})
        with pytest.raises(LoginFailed, match="left the site"):
            run(site, lambda f: log_in(f, form(site)), elsewhere.server.port)
        assert elsewhere.log == []


def test_a_login_redirect_to_an_address_no_parser_reads_fails_the_login_with_why():
    """Raw HTTP: no well-behaved framework sends ``Location: http://[::1``."""
    with HostileServer() as server:
        login = LoginForm(server.url("/redirect?to=http://[::1"), (("username", USER),), "Members")
        guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

        async def go():
            async with Fetcher(POLICY, guard) as fetcher:
                return await log_in(fetcher, login)

        with pytest.raises(LoginFailed, match="no valid address"):
            asyncio.run(go())


def test_credentials_never_reach_another_origin_even_through_a_redirect():
    with LoginSite() as site, RequestLog() as elsewhere:
        site.server.clear()
        site.server.expect_request("/go").respond_with_data("", status=302, headers={"Location": elsewhere.url("/x")})
        creds = Credentials.for_site(site.url("/"), headers=["X-Token: top-secret"], cookies={"sessionid": "abc"})
        result = run(site, lambda f: f.fetch(site.url("/go")), elsewhere.server.port, credentials=creds)
        assert result.status == 200
        assert [h.get("X-Token") for h in elsewhere.log] == [None]
        assert "Cookie" not in elsewhere.log[0]


def test_set_cookie_headers_are_read_one_by_one_and_a_deleted_cookie_leaves_the_jar():
    jar = {"old": "1"}
    read_cookies(jar, ("a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/", "b=2; HttpOnly",
                       'old=""; Max-Age=0; Path=/', "bad cookie ;;; ="))
    assert jar == {"a": "1", "b": "2"}


def test_a_cookie_set_to_expire_in_the_past_is_deleted_and_an_unreadable_date_deletes_nothing():
    jar = {"sid": "old", "keep": "1"}
    read_cookies(jar, ("sid=gone; Expires=Thu, 01-Jan-1970 00:00:01 GMT; Path=/", "keep=2; Expires=soon"))
    assert jar == {"keep": "2"}


@pytest.mark.parametrize("attributes", [
    "Expires=Thu, 01-Jan-70 00:00:01 GMT",  # the classic two-digit year: 1970, not 2070
    "Expires=Wed, 31 Dec 1969 23:59:59 GMT",  # before the epoch
    "Max-Age=00", "Max-Age=-1",
    "Max-Age=0; Expires=Wed, 21 Oct 2037 07:28:00 GMT",  # Max-Age decides over Expires
])
def test_the_ways_sites_delete_a_cookie_all_delete_it(attributes):
    jar = {"sid": "old"}
    read_cookies(jar, (f"sid=gone; {attributes}; Path=/",))
    assert jar == {}


def test_a_valid_max_age_keeps_a_cookie_whatever_its_expires_says():
    jar: dict[str, str] = {}
    read_cookies(jar, ("sid=new; Max-Age=3600; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
                       "pref=1; Max-Age=soon; Expires=Wed, 21 Oct 2037 07:28:00 GMT"))
    assert jar == {"sid": "new", "pref": "1"}


def test_a_fetch_that_lands_on_the_login_page_means_the_session_expired():
    with LoginSite() as site:
        result = run(site, lambda f: f.fetch(site.url("/account/2/")))  # no session
        assert is_login_redirect(result, site.url("/login/"))
        ok = run(site, lambda f: f.fetch(site.url("/login/")))
        assert not is_login_redirect(ok, site.url("/login/"))  # asked for it: no redirect
        assert httpx.URL(result.final_url).path == "/login/"
        # The login URL as a person typed it, without the slash the site sends to.
        assert is_login_redirect(result, site.url("/login"))
        assert not is_login_redirect(result, site.url("/log"))


def test_a_persons_cookie_header_and_the_logins_cookies_go_out_as_one_header():
    with LoginSite() as site:
        creds = Credentials.for_site(site.url("/"), headers=["Cookie: theme=dark"])
        cookies = run(site, lambda f: log_in(f, form(site)), credentials=creds).cookies
        assert "sessionid" in cookies
        posted = [headers for method, path, headers in site.log if method == "POST"]
        assert "theme=dark" in posted[0]["Cookie"] and "csrftoken=" in posted[0]["Cookie"]


def test_a_cookie_that_could_not_go_back_in_a_cookie_header_is_dropped():
    jar: dict[str, str] = {}
    read_cookies(jar, ('lang="\u0151"; Path=/', "bell=a\x07", "ok=1"))
    assert jar == {"ok": "1"}


def test_a_cookie_is_read_as_browsers_read_it_whatever_attributes_it_carries():
    jar: dict[str, str] = {}
    read_cookies(jar, (
        # Attributes Python's own cookie parser refuses the whole line for (Partitioned),
        # or reads as a cookie of its own (Priority), are attributes.
        "sid=abc; Path=/; Secure; HttpOnly; SameSite=None; Partitioned",
        "csrftoken=xyz; Priority=High",
        # The value is what the server sent, quotes included: no escape is read
        # into a line break, and a space inside the quotes stays inside them.
        'pref="dark "', 'note="a\\012b"',
    ))
    assert jar == {"sid": "abc", "csrftoken": "xyz", "pref": '"dark "', "note": '"a\\012b"'}
    header = dict(Credentials.for_site("https://x.test/", cookies=jar).for_url(httpx.URL("https://x.test/")))
    assert header[b"Cookie"].endswith(b'"') and b"\n" not in header[b"Cookie"]


def test_a_request_that_cannot_be_sent_never_quotes_its_headers_in_the_error():
    with LoginSite() as site:
        creds = Credentials.for_site(site.url("/"), headers=["Cookie: team=top-secret"],
                                     cookies={"pref": "a\nb"})
        result = run(site, lambda f: f.fetch(site.url("/account/1/")), credentials=creds)
        assert result.error is not None and result.error_detail
        assert "top-secret" not in result.error_detail and "pref" not in result.error_detail


def test_a_login_page_off_the_origin_of_the_sites_credentials_is_sent_nothing():
    with LoginSite() as site, RequestLog() as elsewhere:
        creds = Credentials.for_site(site.url("/"), headers=["X-Token: top-secret"])
        login = LoginForm(elsewhere.url("/login/"), (("username", USER), ("password", PASSWORD)), "Members")
        with pytest.raises(LoginFailed, match="not on the audited site"):
            run(site, lambda f: log_in(f, login), elsewhere.server.port, credentials=creds)
        assert elsewhere.log == []


def landing_on(final_url: str) -> FetchResult:
    asked = "https://shop.example/index.php?route=product/42"
    return FetchResult(url=asked, final_url=final_url, status=200, redirects=(Hop(asked, 302, final_url),))


def test_a_login_page_addressed_by_its_query_is_not_every_page_of_its_script():
    login = "https://shop.example/index.php?route=account/login"
    assert not is_login_redirect(landing_on("https://shop.example/index.php?route=common/home"), login)
    assert is_login_redirect(landing_on("https://shop.example/index.php?route=account/login&next=42"), login)
    assert is_login_redirect(landing_on("https://shop.example/login/?next=/a/"), "https://shop.example/login/")


class _OddCharsetSite(LoginSite):
    """Its pages declare a charset label no browser reads as a web encoding."""

    charset = "idna"

    def _page(self, path: str):
        response = super()._page(path)
        response.headers["Content-Type"] = f"text/html; charset={self.charset}"
        return response


@pytest.mark.parametrize("charset", ["idna", "x-bogus", "punycode"])
def test_the_page_after_logging_in_is_read_whatever_charset_it_declares(charset):
    # Python's idna codec raised on it and an unknown label raised LookupError,
    # neither a LoginFailed, so the audit's start crashed; punycode is quadratic.
    with _OddCharsetSite() as site:
        site.charset = charset
        cookies = run(site, lambda f: log_in(f, form(site))).cookies
        assert "sessionid" in cookies


class _NoRedirectSite(LoginSite):
    """A GET login form answered 200 in place: the page after logging in is the form's own target."""

    def _login(self, request):
        response = super()._login(request)
        if response.status_code != 302:
            return response
        members = Response(b"<html><body>Members area</body></html>", content_type="text/html")
        members.headers["Set-Cookie"] = response.headers["Set-Cookie"]
        return members


def test_the_page_a_login_redirects_to_is_kept_and_a_forms_own_target_never_is():
    with LoginSite(form_method="get") as site:
        assert run(site, lambda f: log_in(f, form(site))).landing == site.url("/")
    with _NoRedirectSite(form_method="get") as site:
        session = run(site, lambda f: log_in(f, form(site)))
        # Fetched again to tell an expiry, it would log in anew, its password in the query.
        assert "sessionid" in session.cookies and session.landing == ""


class _NoLoginFormSite(Loopback):
    """Its login page's HTML holds only another form (the real one is drawn by JavaScript); every request
    line and body is kept."""

    def __init__(self, login_page: str):
        self.login_page, self.seen = login_page, []
        super().__init__(self.handle)

    def handle(self, request: Request) -> Response:
        self.seen.append(f"{request.method} {request.full_path.rstrip('?')} {request.get_data(as_text=True)}")
        return Response(self.login_page, content_type="text/html")


@pytest.mark.parametrize(("login_page", "fields"), [
    ('<form action="/search"><input name="q"></form>', (("username", USER), ("password", "s3cret"))),
    ('<form method="post" action="/subscribe"><input name="email"><button>Subscribe</button></form>',
     (("email", "ann@example.com"), ("password", "s3cret"))),
])
def test_a_login_page_whose_only_form_is_no_login_form_fails_and_the_password_is_sent_nowhere(login_page, fields):
    with _NoLoginFormSite(f"<!doctype html><html><body>{login_page}</body></html>") as site:
        login = LoginForm(site.url("/login"), fields, "Members")
        with pytest.raises(LoginFailed, match="No login form found"):
            run(site, lambda f: log_in(f, login))
        assert site.seen and not [line for line in site.seen if "s3cret" in line]
        assert [line.split()[:2] for line in site.seen] == [["GET", "/login"]]

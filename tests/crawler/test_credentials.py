"""Credentials go to the audit's own origin only; headers and login forms are read strictly."""

import base64

import httpx
import pytest

from crawler.cookies import MAX_COOKIES
from crawler.credentials import (
    LOGOUT_DEFAULT,
    Credentials,
    basic_header,
    form_to_submit,
    headers_problem,
    login_page_problem,
    parse_header,
)
from crawler.urls import compile_patterns


def creds(**kwargs) -> Credentials:
    return Credentials.for_site("https://staging.example.com/", **kwargs)


def test_credentials_go_to_the_audits_own_origin_and_nowhere_else():
    c = creds(basic=("ann", "s3cret"), headers=["X-Token: abc"])
    home = c.for_url(httpx.URL("https://staging.example.com/deep/page?q=1"))
    assert (b"X-Token", b"abc") in home and any(name == b"Authorization" for name, _ in home)
    for elsewhere in ("https://www.example.com/", "http://staging.example.com/", "https://staging.example.com:8443/",
                      "https://staging.example.com.evil.test/", "https://other.test/staging.example.com/"):
        assert c.for_url(httpx.URL(elsewhere)) == [], elsewhere


def test_the_default_port_is_the_same_origin_as_no_port():
    c = creds(headers=["X-Token: abc"])
    assert c.for_url(httpx.URL("https://staging.example.com:443/")) == [(b"X-Token", b"abc")]


def test_basic_auth_is_rfc_7617_and_refuses_a_colon_in_the_user_name():
    assert basic_header("ann", "pa:ss") == "Basic " + base64.b64encode(b"ann:pa:ss").decode()
    with pytest.raises(ValueError, match="may not contain ':'"):
        basic_header("a:nn", "x")


@pytest.mark.parametrize("line, message", [
    ("no colon here", "Name: value"),
    (": value", "Name: value"),
    ("Bad Name: v", "not a valid header name"),
    ("Host: evil.test", "set by the crawler"),
    ("Content-Length: 0", "set by the crawler"),
    ("X-Split: a\r\nInjected: b", "line breaks"),
])
def test_a_bad_extra_header_is_refused_with_what_is_wrong(line, message):
    with pytest.raises(ValueError, match=message):
        parse_header(line)


@pytest.mark.parametrize("line", ["Proxy-Authorization: Basic YW5uOnMzY3JldA==", "proxy-authorization: Bearer x"])
def test_a_proxy_authorization_header_is_refused_since_it_would_go_to_the_audited_site(line):
    with pytest.raises(ValueError, match="for a proxy"):
        parse_header(line)
    assert "for a proxy" in headers_problem([line])


def test_nothing_to_send_is_no_credentials():
    assert creds() is None


def test_a_logins_cookies_join_the_cookie_header_a_person_set():
    c = creds(headers=["Cookie: theme=dark"]).with_cookies({"sessionid": "abc123"})
    cookie = dict(c.for_url(httpx.URL("https://staging.example.com/")))[b"Cookie"]
    assert cookie == b"theme=dark; sessionid=abc123"
    renewed = c.with_cookies({"sessionid": "def456"})
    assert dict(renewed.headers)[b"Cookie"] == b"theme=dark; sessionid=def456"



def test_cookies_the_origin_sets_join_the_session_and_other_hosts_set_none():
    c = creds(headers=["Cookie: theme=dark"]).with_cookies({"sessionid": "old"})
    home = httpx.URL("https://staging.example.com/account/")
    renewed = c.renewed_by(home, ["sessionid=new; HttpOnly; Path=/", "seen=1; Max-Age=600"])
    assert dict(renewed.for_url(home))[b"Cookie"] == b"theme=dark; sessionid=new; seen=1"
    for elsewhere in ("https://www.example.com/", "http://staging.example.com/"):
        assert c.renewed_by(httpx.URL(elsewhere), ["sessionid=evil"]) is c, elsewhere
    assert c.renewed_by(home, ["sessionid=old; Path=/"]) is c, "nothing new: the same credentials"


def test_a_cookie_the_site_deletes_is_still_sent():
    # The session may live on at the server; a dead one leads to the login page, which the crawl checks for.
    c = creds(headers=["X-Token: abc"]).with_cookies({"sessionid": "abc"})
    home = httpx.URL("https://staging.example.com/")
    for deleting in ("sessionid=; Path=/", "sessionid=abc; Max-Age=0", "sessionid=x; Expires=Thu, 01 Jan 1970 00:00:00 GMT"):
        assert c.renewed_by(home, [deleting]).session == (("sessionid", "abc"),), deleting


def test_a_site_setting_a_new_cookie_on_every_page_fills_the_jar_only_to_its_cap():
    c = creds(headers=["X-Token: abc"])
    home = httpx.URL("https://staging.example.com/")
    for n in range(80):
        c = c.renewed_by(home, [f"visit{n}=1"])
    assert len(c.session) == MAX_COOKIES
    assert dict(c.renewed_by(home, ["visit0=2"]).session)["visit0"] == "2", "a kept cookie still takes new values"

LOGIN_PAGE = b"""<html><body>
<form action="/search"><input name="q"></form>
<form method="post" action="/accounts/login/?next=/">
  <input type="hidden" name="csrfmiddlewaretoken" value="tok-123">
  <input name="username"><input type="password" name="password">
  <input type="checkbox" name="remember" value="1">
  <input type="submit" name="go" value="Log in">
</form></body></html>"""


def test_the_login_form_keeps_its_hidden_fields_and_its_submit_button_and_posts_to_its_action():
    sent = form_to_submit(LOGIN_PAGE, "https://staging.example.com/accounts/login/",
                          {"username": "ann", "password": "s3cret"})
    assert (sent.method, sent.url) == ("POST", "https://staging.example.com/accounts/login/?next=/")
    assert dict(sent.data) == {"csrfmiddlewaretoken": "tok-123", "username": "ann", "password": "s3cret", "go": "Log in"}


@pytest.mark.parametrize(("buttons", "sent"), [
    ('<input type="button" name="show" value="Show"><button name="b" value="in">Go</button>', {"b": "in"}),
    ('<button type="button" name="peek">Peek</button><input type="image" name="pic" src="/go.png">',
     {"pic.x": "0", "pic.y": "0"}),
    ('<input type="image" src="/go.png"><input type="submit" name="later" value="No">', {"x": "0", "y": "0"}),
    ('<button name="off" disabled>Go</button><input type="submit" name="later" value="No">', {}),
    ('<button type="reset" name="r">Clear</button><button>Go</button>', {}),
])
def test_the_login_form_sends_its_default_button_as_a_browser_does_and_never_a_plain_button(buttons, sent):
    page = f'<form method="POST"><input name="user"><input type="password" name="pw">{buttons}</form>'.encode()
    data = form_to_submit(page, "https://x.test/login", {"user": "ann", "pw": "s3cret"}).data
    assert dict(data) == {"user": "ann", "pw": "s3cret", **sent}


@pytest.mark.parametrize("method", ["", ' method="get"', ' method="bogus"'])
def test_a_login_form_that_is_not_method_post_is_sent_as_a_get_with_its_fields_as_the_query(method):
    page = f'<form action="/in?old=1#top"{method}><input name="user"><input type="password" name="pw"></form>'.encode()
    sent = form_to_submit(page, "https://x.test/login", {"user": "ann", "pw": "s 3"})
    assert (sent.method, sent.url) == ("GET", "https://x.test/in?user=ann&pw=s+3")


def test_a_form_that_only_closes_a_dialog_is_no_login_form():
    with pytest.raises(ValueError, match="dialog"):
        form_to_submit(b'<form method="dialog"><input type="password" name="pw"></form>', "https://x.test/", {"pw": "a"})


NEWSLETTER_FIRST = b"""<html><body>
<form action="/subscribe"><input name="email"><button>Subscribe</button></form>
<form method="post" action="/login/"><input name="email"><input type="password" name="password"></form>
</body></html>"""


def test_the_login_form_is_the_one_holding_the_fields_not_a_newsletter_form_asking_for_the_same_email():
    sent = form_to_submit(NEWSLETTER_FIRST, "https://x.test/login/", {"email": "a@x.test", "password": "pw"})
    assert sent.url == "https://x.test/login/" and dict(sent.data) == {"email": "a@x.test", "password": "pw"}


@pytest.mark.parametrize("page", [
    b'<form action="/search"><input name="q"></form>',
    b'<form action="/subscribe"><input name="email"><button>Subscribe</button></form>',
    b'<form action="/subscribe"><input name="email"></form><form action="/search"><input name="q"></form>',
])
def test_a_form_with_no_password_input_and_no_input_for_every_field_is_never_sent_the_password(page):
    with pytest.raises(ValueError, match="No login form found"):
        form_to_submit(page, "https://x.test/login", {"email": "a@x.test", "password": "s3cret"})


def test_a_form_with_a_password_input_is_the_login_form_even_when_its_names_differ_from_the_fields():
    page = b"""<form action="/subscribe"><input name="email"></form>
    <form method="post" action="/session"><input name="login"><input TYPE="Password" name="pass"></form>"""
    sent = form_to_submit(page, "https://x.test/login", {"email": "a@x.test", "password": "pw"})
    assert sent.url == "https://x.test/session"


def test_a_form_with_an_input_for_every_field_is_the_login_form_without_a_password_input():
    page = b'<form action="/search"><input name="q"></form><form method="post" action="/in"><input name="pin"></form>'
    sent = form_to_submit(page, "https://x.test/login", {"pin": "1234"})
    assert (sent.url, sent.data) == ("https://x.test/in", [("pin", "1234")])


def test_the_login_form_posts_what_a_browser_would_its_chosen_options_and_not_its_disabled_fields():
    page = b"""<form method="post"><select name="realm"><option value="eu">EU<option value="us" selected>US</select>
    <input name="legacy" value="old" disabled><input name="user"><input type="password" name="pw"></form>"""
    data = form_to_submit(page, "https://x.test/login", {"user": "ann", "pw": "s3cret"}).data
    assert dict(data) == {"realm": "us", "user": "ann", "pw": "s3cret"}


@pytest.mark.parametrize("body", [b"<!-- down for maintenance -->", b"   \n", b""])
def test_a_login_page_with_no_document_is_a_clear_error(body):
    with pytest.raises(ValueError, match="No login form|holds no HTML"):
        form_to_submit(body, "https://x.test/login", {"user": "a"})


@pytest.mark.parametrize(("url", "logout"), [
    ("https://x.test/logout", True), ("https://x.test/accounts/logout/", True), ("https://x.test/users/sign_out", True),
    ("https://x.test/log-out.php", True), ("https://x.test/wp-login.php?action=logout", True),
    ("https://x.test/Account/LogOut", True), ("https://x.test/signout?next=/", True),
    ("https://x.test/blog-outreach/", False), ("https://x.test/design-outline/", False),
    ("https://x.test/catalogoutlet", False), ("https://designoutlet.example/", False),
    ("https://x.test/weblog-outline", False),
    ("https://x.test/Account/LogOff", True), ("https://x.test/logoff.aspx?r=1", True),
    ("https://x.test/user/sign_off", True), ("https://x.test/log-offset/", False),
    ("https://x.test/catalog-offers/", False), ("https://x.test/signoffice", False),
    ("https://x.test/logoutAction.do", True), ("https://x.test/signout-oidc", True),
    ("https://x.test/Account/LogOffUser", True), ("https://x.test/Home/SignOffNow?x=1", True),
    ("https://x.test/logoffice/", False),
    # A camelCase name: a small letter, then Log or Sign with a capital, starts the word.
    ("https://x.test/account/doLogout", True), ("https://x.test/userLogout.do", True),
    ("https://x.test/Home/DoLogOff?returnUrl=/a", True), ("https://x.test/api/userSignOut", True),
    ("https://x.test/doLogout?r=/a/", True), ("https://x.test/auth/userSign_Off", True),
    ("https://x.test/blogOutreach", False), ("https://x.test/catalogOffers/", False),
    ("https://x.test/weblogOutline", False), ("https://x.test/changeLogOffset", False),
    ("https://x.test/userSignOffice", False), ("https://x.test/BLOG-OUTREACH/", False),
    ("https://x.test/catalog/", False), ("https://x.test/blogout-sale", False),
])
def test_the_default_logout_pattern_catches_logout_links_and_not_words_that_contain_one(url, logout):
    assert bool(compile_patterns([LOGOUT_DEFAULT])[0].search(url)) is logout


def test_a_page_without_a_login_form_is_a_clear_error():
    with pytest.raises(ValueError, match="No login form"):
        form_to_submit(b"<html><form></form><form></form></html>", "https://x.test/login", {"user": "a"})


@pytest.mark.parametrize("line", ["Bearer eyJhbGciOiJIUzI1NiJ9.s3cr3t", "Bearer s3cr3t: x"])
def test_a_refused_header_line_is_never_quoted_back_since_it_may_be_the_secret_itself(line):
    with pytest.raises(ValueError) as info:
        parse_header(line)
    assert "s3cr3t" not in str(info.value)


@pytest.mark.parametrize("control", ["\x00", "\x01", "\x0b", "\x1b", "\x7f"])
def test_a_header_value_with_a_control_character_is_refused(control):
    with pytest.raises(ValueError, match="control characters"):
        parse_header(f"X-Token: a{control}b")


def test_a_tab_inside_a_header_value_is_allowed():
    assert parse_header("X-Token: a\tb") == ("X-Token", "a\tb")


@pytest.mark.parametrize(("login_url", "problem"), [
    ("https://staging.example.com/login", None),
    ("https://ann:hunter2@staging.example.com/login", "holds a user name or password"),
    ("https://login.other.example/", "must be on https://staging.example.com"),
    ("https://[::1/login", "must be on https://staging.example.com"),  # not an address: no traceback
])
def test_a_login_page_is_on_the_sites_origin_and_holds_no_secret(login_url, problem):
    found = login_page_problem(login_url, "https://staging.example.com/")
    assert (found is None) if problem is None else (problem in found and "hunter2" not in found)

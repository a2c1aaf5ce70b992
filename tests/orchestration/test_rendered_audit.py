"""Rendered audits: what a browser sees, through the same frontier, writer and checks as the HTML crawl."""

from __future__ import annotations

import socket

import pytest
from werkzeug.wrappers import Response

from audits.inline import run_audit_inline
from audits.models import Audit, Issue, Page, SiteAccess
from tests.factories import make_audit
from tests.login_site import PASSWORD, USER, LoginSite
from tests.render_site import SHELL, RenderSite

pytestmark = [pytest.mark.django_db, pytest.mark.browser]


def audit_of(owner, site, **fields) -> Audit:
    if "start_url" not in fields:
        fields["start_url"] = site.url()
    audit = make_audit(owner, allow_private=True, check_external=False, **fields)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def pages(audit: Audit) -> dict[str, Page]:
    return {p.url: p for p in Page.objects.filter(audit=audit, kind=Page.Kind.PAGE)}


def codes(audit: Audit, url: str) -> set[str]:
    return set(Issue.objects.filter(audit=audit, url=url).values_list("code", flat=True))


@pytest.mark.parametrize("render", ["all", "auto"])
def test_a_rendered_audit_finds_the_pages_only_javascript_links_and_says_what_it_changed(
        owner, fast_settings, render):
    with RenderSite(pages=4) as site:
        plain = audit_of(owner, site)
        rendered = audit_of(owner, site, render=render)

    # The HTML alone is a shell: one page, titled "Loading".
    assert set(pages(plain)) == {site.url()}
    assert pages(plain)[site.url()].title == "Loading"
    found = pages(rendered)
    assert set(found) == {site.url(), *(site.url(f"/app/{n}") for n in range(4))}
    home = found[site.url()]
    assert home.rendered and home.title == "Home of the rendered app"
    assert home.raw_facts["title"] == "Loading" and home.raw_facts["links"] == 0
    assert home.canonical == site.url()
    assert {"render_title_changed", "render_links_added", "render_content_added"} <= codes(rendered, site.url())
    # The depth comes from the rendered links.
    assert {found[site.url(f"/app/{n}")].depth for n in range(4)} == {1}


def test_a_plain_audit_renders_nothing_and_needs_no_browser(owner, fast_settings, settings):
    settings.SITEWARD = {**settings.SITEWARD, "CHROMIUM": "/nonexistent/chromium"}
    with RenderSite(pages=2) as site:
        audit = audit_of(owner, site)
    assert not Page.objects.filter(audit=audit, rendered=True).exists()
    assert not Issue.objects.filter(audit=audit, code__startswith="render_").exists()


def test_without_a_browser_a_rendered_audit_still_completes_and_says_each_page_failed_to_render(
        owner, fast_settings, settings):
    settings.SITEWARD = {**settings.SITEWARD, "CHROMIUM": "/nonexistent/chromium"}
    with RenderSite(pages=2) as site:
        audit = audit_of(owner, site, render="all")
    home = Page.objects.get(audit=audit, url=site.url())
    assert not home.rendered and home.title == "Loading"
    failed = Issue.objects.get(audit=audit, url=site.url(), code="render_failed")
    assert "browser could not start" in failed.message


@pytest.fixture
def other():
    """Another loopback server the page's script must never reach."""
    from pytest_httpserver import HTTPServer

    with HTTPServer(host="127.0.0.1", port=0) as server:
        server.expect_request("/secret").respond_with_data("the secret")
        yield server


def test_a_script_reaching_for_another_port_the_metadata_address_or_a_robots_url_is_refused_and_reported(
        owner, fast_settings, other):
    with RenderSite(other=other.url_for("/")[:-1]) as site:
        audit = audit_of(owner, site, render="all", start_url=site.url("/spy"), max_pages=1)
        asked = dict(site.requests)
    assert other.log == []  # nothing reached the other port
    assert "/private/data" not in asked  # robots.txt disallows it, for the browser too
    assert "/private/moved" not in asked  # and where a redirect the script followed points
    blocked = dict(Issue.objects.filter(audit=audit, code="render_request_blocked").values_list("target_url",
                                                                                                 "message"))
    assert "private or reserved" in blocked[other.url_for("/secret")]
    assert "private or reserved" in blocked["http://169.254.169.254/latest/meta-data/"]
    assert "robots.txt" in blocked[site.url("/private/data")]
    assert "robots.txt" in blocked[site.url("/private/moved")]


def test_a_frame_of_another_origin_cannot_read_the_audited_sites_pages_through_the_browser(owner, fast_settings):
    """The browser's requests carry the site's credentials: a third party's frame (an ad, a widget) asking for
    the site's pages must not read them, as a real browser's CORS would not let it."""
    with RenderSite() as site:
        audit = audit_of(owner, site, render="all", start_url=site.url("/framed"), max_pages=1)
    assert pages(audit)[site.url("/framed")].title == "Frame read: refused"
    assert site.requests["/account/secret"] == 0


def test_a_page_whose_charset_only_its_meta_names_is_rendered_in_that_charset(owner, fast_settings):
    with RenderSite() as site:
        audit = audit_of(owner, site, render="all", start_url=site.url("/latin"), max_pages=1)
    page = pages(audit)[site.url("/latin")]
    assert page.rendered and page.title == "Café crème, a page in Latin-1"
    assert "render_title_changed" not in codes(audit, site.url("/latin"))


def test_the_browser_asks_for_a_failing_subresource_once_as_a_browser_does(owner, fast_settings):
    """Retried with the crawl's backoff, one dead host's requests held the browser fetcher's slots."""
    with RenderSite() as site:
        audit = audit_of(owner, site, render="all", start_url=site.url("/retry"), max_pages=1)
        asked = site.methods["GET", "/unavailable.js"]  # the crawl's own check of the script asks by HEAD
    assert asked == 1
    assert Issue.objects.filter(audit=audit, code="render_request_failed").exists()


def test_links_inside_a_web_components_shadow_root_are_found(owner, fast_settings):
    with RenderSite() as site:
        audit = audit_of(owner, site, render="all", start_url=site.url("/shadow"), max_pages=5, max_depth=1)
    assert site.url("/app/1") in pages(audit)


def test_a_page_opens_no_windows(owner, fast_settings):
    with RenderSite() as site:
        audit = audit_of(owner, site, render="all", start_url=site.url("/popups"), max_pages=1)
    assert pages(audit)[site.url("/popups")].title == "Opened 0 windows of the popup page"


def test_a_pages_webrtc_sends_no_udp_past_the_fetcher(owner, fast_settings):
    """STUN is UDP: the dead HTTP proxy does not stop it, so a page could probe the crawler's network."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stun:
        stun.bind(("127.0.0.1", 0))
        stun.settimeout(0.5)
        with RenderSite(stun_port=stun.getsockname()[1]) as site:
            audit_of(owner, site, render="all", start_url=site.url("/rtc"), max_pages=1)
        with pytest.raises(TimeoutError):
            stun.recvfrom(2048)


def test_a_page_that_spins_or_never_goes_quiet_is_bounded_and_the_crawl_goes_on(owner, fast_settings, settings):
    import time

    settings.SITEWARD = {**settings.SITEWARD, "RENDER_DEADLINE": 2.0}
    with RenderSite() as site:
        started = time.monotonic()
        spin = audit_of(owner, site, render="all", start_url=site.url("/spin"), max_pages=1)
        chatty = audit_of(owner, site, render="all", start_url=site.url("/chatty"), max_pages=1)
        took = time.monotonic() - started
    assert took < 40
    timeout = Issue.objects.get(audit=spin, code="render_timeout")
    assert "busy" in timeout.message
    page = Page.objects.get(audit=chatty, url=site.url("/chatty"))
    # Read at the deadline: rendered all the same, and said so.
    assert page.rendered and page.title == "App page NaN of the rendered app"
    assert Issue.objects.filter(audit=chatty, code="render_timeout", message__contains="never went quiet").exists()


def test_script_errors_and_failed_requests_become_page_issues(owner, fast_settings):
    with RenderSite() as site:
        audit = audit_of(owner, site, render="all", start_url=site.url("/broken"), max_pages=1)
    errors = list(Issue.objects.filter(audit=audit, code="render_js_error").values_list("message", flat=True))
    assert any("undefinedFunction" in message for message in errors)
    assert not any(message.startswith("Failed to load resource") for message in errors)
    failed = Issue.objects.get(audit=audit, code="render_request_failed")
    assert failed.target_url == site.url("/missing.js") and "404" in failed.message


def test_the_audit_command_renders_with_render_and_reports_what_javascript_changed(tmp_path, fast_settings):
    import json

    from tests.audit_command import run_audit

    out = tmp_path / "rendered.jsonl"
    with RenderSite(pages=2) as site:
        run_audit(site.url(), "--allow-private", "--no-external", "--render", "auto", "--out", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    pages = {r["url"]: r for r in records if r["type"] == "page"}
    home = pages[site.url()]
    assert home["rendered"] is True and home["title"] == "Home of the rendered app"
    assert home["raw"]["title"] == "Loading" and home["raw"]["links"] == 0
    assert {"render_title_changed", "render_links_added"} <= {d["code"] for d in home["differences"]}
    assert set(pages) >= {site.url("/app/0"), site.url("/app/1")}
    assert Audit.objects.get().render == "auto"


def test_a_delta_crawl_of_a_rendered_audit_renders_its_pages_again_though_their_shell_is_unchanged(
        owner, fast_settings):
    """An app's index.html stays byte for byte the same while its script and data change what it shows."""
    with RenderSite(pages=3) as site:
        first = audit_of(owner, site, render="all")
        site.pages = 4  # the script now links one more page; every shell is as it was
        delta = audit_of(owner, site, render="all", mode=Audit.Mode.DELTA, source=first)
    found = pages(delta)
    assert set(found) == {*pages(first), site.url("/app/3")}
    assert not [p for p in found.values() if p.unchanged_since]
    assert all(p.rendered and p.title != "Loading" for p in found.values())


class PlainHomeSite(RenderSite):
    """Its home page is plain HTML linking the first app page, which a crawl without a browser finds too."""

    def answer(self, path: str) -> tuple[int, str, bytes]:
        if path == "/":
            return 200, "text/html; charset=utf-8", (b'<!doctype html><html lang="en"><head><title>Home</title>'
                                                     b'</head><body><h1>Home</h1><a href="/app/0">app</a></body></html>')
        return super().answer(path)


def test_a_delta_crawl_renders_the_pages_its_source_could_not_render(owner, fast_settings, settings):
    """Stored unrendered for want of a browser, a page's unchanged shell says nothing of what it shows."""
    with PlainHomeSite(pages=2) as site:
        chromium = settings.SITEWARD["CHROMIUM"]
        settings.SITEWARD = {**settings.SITEWARD, "CHROMIUM": "/nonexistent/chromium"}
        first = audit_of(owner, site, render="all")
        assert codes(first, site.url("/app/0")) >= {"render_failed"}
        settings.SITEWARD = {**settings.SITEWARD, "CHROMIUM": chromium}
        delta = audit_of(owner, site, render="all", mode=Audit.Mode.DELTA, source=first)
    app = pages(delta)[site.url("/app/0")]
    assert app.unchanged_since is None and app.rendered and app.title == "App page 0 of the rendered app"
    assert "render_failed" not in codes(delta, site.url("/app/0"))
    assert site.url("/app/1") in pages(delta)


class LogoutScriptSite(RenderSite):
    """``/leaving``'s script asks for the logout URL, as a single-logout page or a stray beacon does."""

    def answer(self, path: str) -> tuple[int, str, bytes]:
        if path == "/leaving":
            script = '<script>fetch("/logout/").catch(() => 0); new Image().src = "/sign-out.gif";</script>'
            return 200, "text/html; charset=utf-8", SHELL.format(head="", scripts=script).encode()
        return super().answer(path)


def test_a_private_sites_browser_never_requests_its_logout_urls(owner, fast_settings):
    with LogoutScriptSite() as site:
        audit = make_audit(owner, allow_private=True, check_external=False, render="all",
                           start_url=site.url("/leaving"), max_pages=1)
        access = SiteAccess(site=audit.site)
        access.set_headers(["X-Staging: yes"])
        access.save()
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        asked = dict(site.requests)
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert "/logout/" not in asked and "/sign-out.gif" not in asked
    blocked = dict(Issue.objects.filter(audit=audit, code="render_request_blocked").values_list("target_url",
                                                                                                 "message"))
    assert "logout" in blocked[site.url("/logout/")]


class MembersAppSite(LoginSite):
    """A members' start page whose links only its script writes, and the script is for members only."""

    def _page(self, path):
        if path == "/":
            return Response('<!doctype html><html lang="en"><head><title>Members</title></head><body>'
                            '<div id="root"></div><script src="/members.js"></script></body></html>',
                            content_type="text/html")
        if path == "/members.js":
            links = "".join(f"add({p!r});" for p in self.paths())
            return Response("const root = document.getElementById('root');"
                            "function add(p) { const a = document.createElement('a'); a.href = p; "
                            "a.textContent = p; root.appendChild(a); }" + links,
                            content_type="application/javascript")
        return super()._page(path)


def test_a_rendered_private_sites_start_page_runs_logged_in(owner, fast_settings):
    with MembersAppSite(pages=3) as site:
        audit = make_audit(owner, allow_private=True, check_external=False, render="all",
                           start_url=site.url("/"), max_pages=10, max_depth=2)
        access = SiteAccess(site=audit.site)
        access.set_login(site.url("/login/"), {"username": USER}, {"password": PASSWORD}, r"Members")
        access.save()
        run_audit_inline(audit.pk)
        audit.refresh_from_db()

    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    # The browser asked for the members' script with the session, so its links were found and crawled.
    assert {site.url(p) for p in site.paths()} <= set(
        Page.objects.filter(audit=audit, status_code=200).values_list("url", flat=True))


def test_a_rendered_start_page_is_judged_knowing_the_sitemap_lists_it(owner, fast_settings, httpserver):
    # The rendered page's checks run again on what the browser built: with the same listing.
    home = ('<!doctype html><html lang="en"><head><title>Home of the listed site</title>'
            '<meta name="robots" content="noindex"></head><body><h1>Home</h1><p>Words.</p></body></html>')
    httpserver.expect_request("/robots.txt").respond_with_data(
        f"User-agent: *\nSitemap: {httpserver.url_for('/sitemap.xml')}\n", content_type="text/plain")
    httpserver.expect_request("/sitemap.xml").respond_with_data(
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{httpserver.url_for("/")}</loc>'
        "</url></urlset>", content_type="application/xml")
    httpserver.expect_request("/").respond_with_data(home, content_type="text/html")
    audit = audit_of(owner, httpserver, start_url=httpserver.url_for("/"), render="all")
    noindex = Issue.objects.get(audit=audit, code="noindex")
    assert (noindex.severity, noindex.message.endswith("but listed in the sitemap")) == ("critical", True)


def test_an_apps_not_found_view_served_with_200_is_a_soft_404_of_a_rendered_audit(owner, fast_settings):
    """Every path gets the app's shell; only its script shows "not found". The probe is rendered as the pages are."""
    with RenderSite(pages=2, catch_all=True) as site:
        audit = audit_of(owner, site, render="all")
        dead = pages(audit)[site.url("/app/99")]
        assert dead.status_code == 200
        assert "soft_404" in codes(audit, site.url("/app/99"))
        assert "soft_404" not in codes(audit, site.url("/app/1"))
        assert "soft_404" not in codes(audit, site.url("/"))

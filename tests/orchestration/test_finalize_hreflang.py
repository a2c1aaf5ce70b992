"""hreflang cross-page checks: alternates that are not a 200, indexable, self-canonical
page, and alternates that do not link back, found by finalize after a real crawl of a
loopback site.

The crawl stores every page's hreflang alternates as link edges (tag "hreflang", the
language code as anchor text) and queues same-site alternates as pages. Every alternate
of the main fixture is also linked from the home page, so the expectations do not depend
on the queueing; a separate test shows an alternate no <a> reaches is crawled and judged.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audits.finalize import hreflang_return_links, hreflang_targets
from audits.inline import run_audit_inline
from audits.issue_rows import insert_issues
from audits.models import Audit, Issue, LinkEdge
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def _alternates(pairs: list[tuple[str, str]]) -> str:
    return "".join(f'<link rel="alternate" hreflang="{lang}" href="{href}">' for lang, href in pairs)


def _html(title: str, *, head: str = "", links: tuple[str, ...] = ()) -> bytes:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return (
        f'<!doctype html><html lang="en"><head><title>{title} of the hreflang test site</title>{head}</head>'
        f"<body><h1>{title}</h1><p>{'words ' * 60}</p>{anchors}</body></html>"
    ).encode()


class Site:
    """Two loopback origins: the site under audit and "elsewhere", another site it names.

    ``routes`` maps a path to (status, body, extra headers); anything else is a 404.
    """

    def __init__(self):
        self.routes: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        self.elsewhere_routes: dict[str, tuple[int, bytes, dict[str, str]]] = {}
        self._servers: list[ThreadingHTTPServer] = []

    def _serve(self, routes) -> ThreadingHTTPServer:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                status, body, headers = routes.get(self.path, (404, _html("Not found"), {}))
                self.send_response(status)
                for name, value in {"Content-Type": "text/html; charset=utf-8", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._servers.append(server)
        return server

    def __enter__(self):
        self.site = self._serve(self.routes)
        self.elsewhere = self._serve(self.elsewhere_routes)
        return self

    def __exit__(self, *exc):
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.site.server_address[1]}{path}"

    def other(self, path: str) -> str:
        return f"http://127.0.0.1:{self.elsewhere.server_address[1]}{path}"


def _build(site: Site) -> None:
    """The pages, with every alternate that should be crawled also linked from home."""
    u, other = site.url, site.other
    page = lambda title, pairs, **kw: (200, _html(title, head=_alternates(pairs), **kw), {})  # noqa: E731
    crawled = ("/fr/", "/de/", "/es/", "/pt-missing/", "/it-noindex/", "/nl-canon/", "/nl/", "/sv-old",
               "/sv/", other("/ja/"), "/blocked/da/")
    site.routes.update({
        "/robots.txt": (200, b"User-agent: *\nDisallow: /blocked/\n", {"Content-Type": "text/plain"}),
        # "/" and "/fr/" name each other: a correct pair, nothing to report.
        "/": page("Home", [("en", u("/")), ("fr", u("/fr/")), ("x-default", u("/"))], links=crawled),
        "/fr/": page("Accueil", [("fr", u("/fr/")), ("en", u("/")), ("x-default", u("/"))]),
        # /de/ names "/" as its English version, "/" does not name /de/: no return link.
        "/de/": page("Startseite", [("de", u("/de/")), ("en", u("/")), ("x-default", u("/"))]),
        # /es/ names alternates that are each wrong in one way; all but the missing
        # one link back, so only the target problem is reported for them.
        "/es/": page("Inicio", [
            ("es", u("/es/")), ("x-default", u("/es/")),
            ("pt", u("/pt-missing/")),  # 404
            ("it", u("/it-noindex/")),  # noindex
            ("nl", u("/nl-canon/")),  # canonicalised to /nl/
            ("sv", u("/sv-old")),  # redirects to /sv/
            ("da", u("/blocked/da/")),  # disallowed by robots.txt
            ("ja", other("/ja/")),  # another site, crawled as an external link: not judged for return links
        ]),
        "/it-noindex/": (200, _html("Inizio", head='<meta name="robots" content="noindex">' + _alternates(
            [("it", u("/it-noindex/")), ("es", u("/es/")), ("x-default", u("/es/"))])), {}),
        "/nl-canon/": (200, _html("Begin", head=f'<link rel="canonical" href="{u("/nl/")}">' + _alternates(
            [("nl", u("/nl-canon/")), ("es", u("/es/")), ("x-default", u("/es/"))])), {}),
        "/nl/": page("Begin echt", [("nl", u("/nl/")), ("x-default", u("/nl/"))]),
        "/sv-old": (301, b"", {"Location": u("/sv/")}),
        # /sv/ names /es/, which names /sv-old (the redirect), not /sv/: no return link.
        # Crawled as /sv-old too, where its edges must not be judged a second time.
        "/sv/": page("Start", [("sv", u("/sv/")), ("es", u("/es/")), ("x-default", u("/sv/"))]),
    })
    site.elsewhere_routes.update({"/ja/": page("Homu", [("ja", other("/ja/"))])})


@pytest.fixture
def crawled(owner, fast_settings):
    with Site() as site:
        _build(site)
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=100,
                                     max_depth=5, check_external=True)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
        yield site, audit


def _cross_page(audit: Audit) -> set[tuple[str, str, str]]:
    """(page, alternate, message) of every cross-page hreflang issue (the per-page ones have no target)."""
    return set(Issue.objects.filter(audit=audit, code="hreflang_error").exclude(target_url="")
               .values_list("url", "target_url", "message"))


def test_alternates_are_stored_as_hreflang_edges_with_their_language(crawled):
    site, audit = crawled
    edges = set(LinkEdge.objects.filter(audit=audit, source_url=site.url("/"), tag="hreflang")
                .values_list("target_url", "anchor_text", "internal"))
    # "x-default" shares "/" with "en": one edge, under the first code listed.
    assert edges == {(site.url("/"), "en", True), (site.url("/fr/"), "fr", True)}
    external = LinkEdge.objects.get(audit=audit, source_url=site.url("/es/"), target_url=site.other("/ja/"))
    assert (external.tag, external.anchor_text, external.internal) == ("hreflang", "ja", False)


def test_each_bad_alternate_and_each_missing_return_link_is_reported_once_on_the_naming_page(crawled):
    site, audit = crawled
    u = site.url
    assert _cross_page(audit) == {
        (u("/es/"), u("/pt-missing/"), f"hreflang “pt” alternate {u('/pt-missing/')} answered 404"),
        (u("/es/"), u("/it-noindex/"), f"hreflang “it” alternate {u('/it-noindex/')} is noindex"),
        (u("/es/"), u("/nl-canon/"),
         f"hreflang “nl” alternate {u('/nl-canon/')} is canonicalised to {u('/nl/')}"),
        (u("/es/"), u("/sv-old"), f"hreflang “sv” alternate {u('/sv-old')} redirects to {u('/sv/')}"),
        (u("/es/"), u("/blocked/da/"), f"hreflang “da” alternate {u('/blocked/da/')} is blocked by robots.txt"),
        # The two wrong pages also name themselves: each is told once, on itself.
        (u("/it-noindex/"), u("/it-noindex/"), "hreflang “it” names this page, which is noindex"),
        (u("/nl-canon/"), u("/nl-canon/"),
         f"hreflang “nl” names this page, which is canonicalised to {u('/nl/')}"),
        (u("/de/"), u("/"), f"hreflang “en” alternate {u('/')} does not link back to this page"),
        (u("/sv/"), u("/es/"), f"hreflang “es” alternate {u('/es/')} does not link back to this page"),
    }
    # Every issue hangs on the naming page's row, so the page view lists it.
    for issue in Issue.objects.filter(audit=audit, code="hreflang_error").exclude(target_url=""):
        assert issue.page is not None and issue.page.url == issue.url


def test_a_broken_alternate_is_an_hreflang_error_not_a_broken_resource(crawled):
    site, audit = crawled
    target = site.url("/pt-missing/")
    assert not Issue.objects.filter(audit=audit, code="broken_resource", target_url=target).exists()
    # The <a> link from home to it is still a broken link.
    assert Issue.objects.filter(audit=audit, code="broken_link_internal", url=site.url("/"),
                                target_url=target).exists()


def test_alternates_on_other_sites_and_pages_reached_by_redirect_add_no_return_link_noise(crawled):
    site, audit = crawled
    issues = _cross_page(audit)
    # The other site's page was fetched (an external link) and names nobody back.
    assert audit.pages.filter(url=site.other("/ja/"), kind="external", status_code=200).exists()
    assert not {i for i in issues if i[1] == site.other("/ja/")}
    # /sv-old is a redirect: its one edge is to where it lands, and /sv/ reports its own alternates.
    assert set(LinkEdge.objects.filter(audit=audit, source_url=site.url("/sv-old")).values_list("tag", "target_url")) \
        == {("redirect", site.url("/sv/"))}
    assert not {i for i in issues if i[0] == site.url("/sv-old")}


def test_running_the_checks_again_adds_no_issue(crawled):
    _, audit = crawled
    before = Issue.objects.filter(audit=audit).count()
    for check in (hreflang_targets, hreflang_return_links):
        insert_issues(check(audit.pk))
    assert Issue.objects.filter(audit=audit).count() == before


def test_issue_counters_include_the_cross_page_issues(crawled):
    _, audit = crawled
    assert audit.issues_warning == Issue.objects.filter(audit=audit, severity="warning").count()
    assert audit.issues_total == Issue.objects.filter(audit=audit).count()


def test_an_alternate_that_no_link_reaches_is_still_crawled_and_judged(owner, fast_settings):
    with Site() as site:
        u = site.url
        site.routes.update({
            "/": (200, _html("Home", head=_alternates([("en", u("/")), ("fr", u("/fr/")), ("x-default", u("/"))])), {}),
            # Named only by the home page's hreflang: no <a>, no sitemap.
            "/fr/": (200, _html("Accueil", head=_alternates([("fr", u("/fr/")), ("x-default", u("/fr/"))])), {}),
        })
        audit = make_audit(owner, start_url=u("/"), allow_private=True, max_pages=20, max_depth=5)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
        assert audit.pages.filter(url=u("/fr/"), kind="page", status_code=200).exists()
        # /fr/ names no English version, so "/" gets the missing return link.
        assert _cross_page(audit) == {
            (u("/"), u("/fr/"), f"hreflang “fr” alternate {u('/fr/')} does not link back to this page"),
        }

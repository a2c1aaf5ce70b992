"""Delta mode: a reused page keeps only what its body says; its answer and its context are judged on this fetch."""

from __future__ import annotations

import pytest

from audits.crawl.chunk import claim, lease_items
from audits.crawl.reuse import source_of, validators
from audits.crawl.setup import crawl_setup
from audits.crawl.start import run_start
from audits.crawl.writer import ChunkWriter
from audits.dispatch import InlineDispatcher
from audits.models import Audit, FrontierURL, Issue, Page, PageChange, SiteAccess
from crawler.page import PageOutcome
from crawler.types import FetchResult
from crawler.urls import url_hash
from tests.factories import completed_audit, make_audit
from tests.scripted_site import Answer, ScriptedSite

from .outcomes import parsed_page

pytestmark = pytest.mark.django_db


def html(title: str, body: str = "", *, head: str = "") -> str:
    return (f'<!doctype html><html lang="en"><head><title>{title}</title>{head}<meta name="viewport" '
            f'content="width=device-width"><meta name="description" content="A page of the delta test site with '
            f'a description long enough to pass every length check."></head><body><h1>{title}</h1>'
            f'<p>Some words on the page.</p>{body}</body></html>')


def audit_of(owner, site: ScriptedSite, **fields) -> Audit:
    return completed_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, max_pages=100,
                           **fields)


def first_delta_full(owner, site: ScriptedSite, change) -> tuple[Audit, Audit, Audit]:
    """A full audit, then ``change()`` to the site, then a delta audit and a full audit of the site as it is."""
    first = audit_of(owner, site)
    change()
    return first, audit_of(owner, site, mode=Audit.Mode.DELTA, source=first), audit_of(owner, site)


def row(audit: Audit, site: ScriptedSite, path: str) -> Page:
    return Page.objects.get(audit=audit, url=site.url(path))


def issues(audit: Audit, site: ScriptedSite, path: str) -> set[tuple[str, str]]:
    return set(Issue.objects.filter(audit=audit, url=site.url(path)).values_list("code", "severity"))


@pytest.mark.parametrize("honour", [True, False], ids=["304", "same-body"])
def test_a_reused_page_takes_its_robots_and_canonical_headers_from_this_answer(owner, fast_settings, honour):
    """Launch day: the staging headers (noindex, a canonical to staging) go; the HTML stays as it was."""
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>'), honour=honour,
                                 headers={"ETag": '"a1"', "X-Robots-Tag": "noindex",
                                          "Link": f'<{web.url("/staging")}>; rel="canonical"'})

        def launch():
            web.pages["/a"].headers = {"ETag": '"a1"'}

        first, delta, full = first_delta_full(owner, web, launch)
    assert ("noindex", "warning") in issues(first, web, "/a")
    reused, parsed = row(delta, web, "/a"), row(full, web, "/a")
    assert reused.unchanged_since == first.pk
    assert (reused.indexable, reused.robots, reused.canonical) == (parsed.indexable, parsed.robots, parsed.canonical)
    assert (reused.indexable, reused.robots, reused.canonical) == (True, "", "")
    assert issues(delta, web, "/a") == issues(full, web, "/a")


def test_a_canonical_tag_and_a_link_header_that_disagree_still_conflict_in_a_delta(owner, fast_settings):
    """The header's canonical is not what the row stores (the tag wins), yet a 304 need not repeat it."""
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>',
                                      head='<link rel="canonical" href="/a">'),
                                 headers={"ETag": '"a1"', "Link": f'<{web.url("/other")}>; rel="canonical"'})
        first, delta, full = first_delta_full(owner, web, lambda: None)
    assert ("canonical_conflict", "warning") in issues(full, web, "/a")
    assert row(delta, web, "/a").unchanged_since == first.pk
    assert issues(delta, web, "/a") == issues(full, web, "/a")


@pytest.mark.parametrize(("robots_header", "asked_with_etag"), [("index, follow", True), ("all", True),
                                                                 ("noindex", False)])
def test_a_page_is_asked_with_its_etag_unless_its_headers_said_something(owner, fast_settings, robots_header,
                                                                         asked_with_etag):
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>'),
                                 headers={"ETag": '"a1"', "X-Robots-Tag": robots_header})
        first = audit_of(owner, web)
    digest = url_hash(web.url("/a"))
    assert (validators(first.pk, [digest])[digest].etag == '"a1"') is asked_with_etag


@pytest.mark.parametrize("said_by", ["tags", "headers"])
def test_a_reused_page_keeps_the_robots_and_canonical_its_tags_or_headers_said(owner, fast_settings, said_by):
    """Tags come from the stored parse; headers a 304 need not repeat, so such a page is asked in full."""
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        if said_by == "tags":
            head, headers = '<meta name="robots" content="noindex, nofollow"><link rel="canonical" href="/">', {}
        else:
            head, headers = "", {"X-Robots-Tag": "noindex, nofollow", "Link": f'<{web.url("/")}>; rel="canonical"'}
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>', head=head),
                                 headers={"ETag": '"a1"', **headers})
        first, delta, full = first_delta_full(owner, web, lambda: None)
    reused, parsed = row(delta, web, "/a"), row(full, web, "/a")
    assert reused.unchanged_since == first.pk
    assert (reused.indexable, reused.robots, reused.canonical) == (False, "nofollow,noindex", web.url("/"))
    assert (reused.indexable, reused.robots, reused.canonical) == (parsed.indexable, parsed.robots, parsed.canonical)
    assert issues(delta, web, "/a") == issues(full, web, "/a")


def test_a_slow_page_that_became_fast_is_not_slow_in_a_delta(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>'),
                                 headers={"ETag": '"a1"'}, delay=1.0)  # past CheckSettings.slow_ms

        def faster():
            web.pages["/a"].delay = 0.0

        first, delta, _ = first_delta_full(owner, web, faster)
    assert "slow_response" in {code for code, _ in issues(first, web, "/a")}
    assert row(delta, web, "/a").unchanged_since == first.pk
    assert "slow_response" not in {code for code, _ in issues(delta, web, "/a")}


def test_a_noindex_page_newly_listed_in_the_sitemap_is_critical_in_a_delta(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages["/robots.txt"] = Answer(f"User-agent: *\nDisallow:\nSitemap: {web.url('/sitemap.xml')}\n",
                                          ctype="text/plain")

        def sitemap(*paths: str) -> Answer:
            urls = "".join(f"<url><loc>{web.url(p)}</loc></url>" for p in paths)
            return Answer('<?xml version="1.0" encoding="UTF-8"?><urlset '
                          f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>',
                          ctype="application/xml")

        web.pages["/sitemap.xml"] = sitemap("/")
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>',
                                      head='<meta name="robots" content="noindex">'), headers={"ETag": '"a1"'})

        def listed():
            web.pages["/sitemap.xml"] = sitemap("/", "/a")  # the page is listed now; it did not change

        first, delta, full = first_delta_full(owner, web, listed)
    assert ("noindex", "warning") in issues(first, web, "/a")
    assert row(delta, web, "/a").unchanged_since == first.pk
    assert ("noindex", "critical") in issues(delta, web, "/a")
    assert issues(delta, web, "/a") == issues(full, web, "/a")


def test_a_reused_pdf_is_not_reported_changed(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/doc.pdf">the document</a>'))
        web.pages["/doc.pdf"] = Answer(b"%PDF-1.4 a small document", ctype="application/pdf",
                                       headers={"ETag": '"pdf1"'})
        first, delta, full = first_delta_full(owner, web, lambda: None)
    reused, parsed = row(delta, web, "/doc.pdf"), row(full, web, "/doc.pdf")
    assert reused.unchanged_since == first.pk
    assert (reused.indexable, reused.title, reused.robots) == (parsed.indexable, parsed.title, parsed.robots)
    assert not PageChange.objects.filter(audit=delta, url=web.url("/doc.pdf")).exists()


def unchanged(url: str, depth: int) -> PageOutcome:
    """What the fetch of a page the server calls unchanged returns: a 304, unparsed."""
    return PageOutcome(url, depth, FetchResult(url, url, status=304, headers={"etag": '"b"'}), None, (), (),
                       unchanged=True)


def test_a_reused_page_gives_a_shorter_click_depth_to_a_page_already_queued_deeper(owner, fast_settings):
    """/b (one click deep) and /q (two) both link /x; /q is written first, so /x is queued three deep."""
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a><a href="/b">b</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/q">q</a>'))
        web.pages["/q"] = Answer(html("Page q of the delta test site", '<a href="/x">x</a>'))
        web.pages["/b"] = Answer(html("Page b of the delta test site", '<a href="/x">x</a>'),
                                 headers={"ETag": '"b"'})
        web.pages["/x"] = Answer(html("Page x of the delta test site", '<a href="/">home</a>'))
        first = audit_of(owner, web)
        assert row(first, web, "/x").depth == 2
        delta = make_audit(owner, start_url=web.url("/"), allow_private=True, check_external=False,
                           mode=Audit.Mode.DELTA, source=first)
        run_start(delta.pk, InlineDispatcher())
    delta.refresh_from_db()
    lease = claim(delta.pk, 1)
    writer = ChunkWriter(delta, lease, crawl_setup(delta))
    writer.hold(lease_items(delta, lease))
    writer.write([parsed_page(web.url("/q"), (web.url("/x"), "x"), depth=2)])
    assert FrontierURL.objects.get(audit=delta, url=web.url("/x")).depth == 3
    writer.write([unchanged(web.url("/b"), 1)])
    assert row(delta, web, "/b").unchanged_since == first.pk
    assert FrontierURL.objects.get(audit=delta, url=web.url("/x")).depth == 2


def test_a_delta_crawl_as_someone_else_than_its_source_reuses_nothing(owner, fast_settings):
    """Crawled anonymously last time, logged in now: a 304 by date says nothing about what a member sees."""
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'), headers={"ETag": '"h"'})
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>'), headers={"ETag": '"a"'})
        anonymous = audit_of(owner, web)
        access = SiteAccess(site=anonymous.site)
        access.set_headers(["X-Team: blue"])
        access.save()
        as_blue = audit_of(owner, web, mode=Audit.Mode.DELTA, source=anonymous)
        again_as_blue = audit_of(owner, web, mode=Audit.Mode.DELTA, source=as_blue)
        access.set_headers(["X-Team: red"])
        access.save()
        as_red = audit_of(owner, web, mode=Audit.Mode.DELTA, source=again_as_blue)

    assert row(as_blue, web, "/a").unchanged_since is None
    assert row(again_as_blue, web, "/a").unchanged_since == as_blue.pk  # the same access: reused
    assert row(as_red, web, "/a").unchanged_since is None
    assert anonymous.access_identity == "" and as_blue.access_identity not in ("", as_red.access_identity)
    assert "blue" not in as_blue.access_identity  # a keyed digest, not the header


def test_a_delta_whose_site_access_changed_after_its_start_reuses_nothing_from_then_on(owner):
    source = make_audit(owner, status=Audit.Status.COMPLETED, origin="https://shop.example")
    access = SiteAccess(site=source.site)
    access.set_headers(["X-Team: blue"])
    access.save()
    Audit.objects.filter(pk=source.pk).update(access_identity=access.identity())
    delta = make_audit(owner, mode=Audit.Mode.DELTA, source=source, origin="https://shop.example",
                       access_identity=access.identity())
    assert source_of(delta) == source.pk
    access.set_headers(["X-Team: red"])  # edited while the delta crawl runs: later chunks crawl as red
    access.save()
    assert source_of(delta) is None

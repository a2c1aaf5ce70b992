"""A page's hreflang alternates travel with its outlinks, so they are stored as link edges."""

from crawler.checks import CheckSettings, PageContext
from crawler.page import HREFLANG_TAG, build_outcome, outlinks_of
from crawler.types import FetchResult, Link, PageFacts


def test_alternates_follow_the_links_with_their_language_as_text():
    facts = PageFacts(
        base_url="https://a.test/en/",
        links=(Link("https://a.test/fr/", "a", "Français"), Link("https://a.test/s.css", "link")),
        hreflang=(
            ("en", "https://a.test/en/"),
            ("fr", "https://A.test:443/fr/#top"),
            (" x-default ", "https://a.test/en/"),  # same URL as "en": one link, the first code
            ("de", "https://de.example/"),
        ),
    )
    links, invalid = outlinks_of(facts, "https://a.test/en/")
    assert [(link.url, link.tag, link.text) for link in links] == [
        ("https://a.test/fr/", "a", "Français"),
        ("https://a.test/s.css", "link", ""),
        ("https://a.test/en/", HREFLANG_TAG, "en"),
        # The <a> to /fr/ does not hide the alternate to it: another tag, another edge.
        ("https://a.test/fr/", HREFLANG_TAG, "fr"),
        ("https://de.example/", HREFLANG_TAG, "de"),
    ]
    assert invalid == 0


def test_an_alternate_that_is_not_a_crawlable_url_is_counted_invalid():
    facts = PageFacts(hreflang=(("de", "http://[not-a-host/"), ("fr", "https://a.test/fr/")))
    links, invalid = outlinks_of(facts, "https://a.test/")
    assert [(link.url, link.tag) for link in links] == [("https://a.test/fr/", HREFLANG_TAG)]
    assert invalid == 1


def test_a_parsed_page_carries_its_alternates_into_its_outcome():
    body = (
        b'<!doctype html><html lang="en"><head><title>t</title>'
        b'<link rel="alternate" hreflang="fr" href="/fr/">'
        b'<link rel="alternate" hreflang="x-default" href="/">'
        b'<link rel="alternate" href="/feed.xml" type="application/rss+xml">'
        b'</head><body><a href="/about">About</a></body></html>'
    )
    result = FetchResult(url="https://a.test/", final_url="https://a.test/", status=200,
                         content_type="text/html", body=body)
    ctx = PageContext(CheckSettings(), is_internal=lambda url: url.startswith("https://a.test/"))
    outcome = build_outcome(result, result.url, 0, ctx)
    assert [(link.url, link.tag, link.text) for link in outcome.outlinks] == [
        ("https://a.test/about", "a", "About"),
        ("https://a.test/fr/", HREFLANG_TAG, "fr"),
        ("https://a.test/", HREFLANG_TAG, "x-default"),
    ]


def test_the_library_crawl_follows_an_alternate_that_no_link_reaches():
    import asyncio

    from crawler.crawl import CrawlLimits, crawl_site
    from tests.crawler.hostile_server import HostileServer, static

    with HostileServer() as server:
        def page(head: str) -> bytes:
            return f"<!doctype html><html><head><title>t</title>{head}</head><body><p>hi</p></body></html>".encode()

        server.route("/", static(page(f'<link rel="alternate" hreflang="fr" href="{server.url("/fr/")}">')))
        server.route("/fr/", static(page("")))
        seen = []
        asyncio.run(crawl_site(server.url("/"), CrawlLimits(allow_private=True, max_pages=10),
                               on_page=seen.append))
    assert [(o.url, o.depth, o.result.status) for o in seen if o.url.endswith("/fr/")] == [
        (server.url("/fr/"), 1, 200),
    ]

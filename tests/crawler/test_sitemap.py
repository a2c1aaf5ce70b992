"""Sitemap parsing on byte fixtures, then discovery against servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc

import pytest

from crawler.sitemap import SitemapReport, discover_sitemaps, parse_sitemap

NS = b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str) -> bytes:
    entries = b"".join(
        b"<url><loc>%s</loc><lastmod>2026-01-01</lastmod></url>" % loc.encode() for loc in locs
    )
    return b'<?xml version="1.0" encoding="UTF-8"?>\n<urlset %s>%s</urlset>' % (NS, entries)


def index(*locs: str) -> bytes:
    entries = b"".join(b"<sitemap><loc>%s</loc></sitemap>" % loc.encode() for loc in locs)
    return b'<?xml version="1.0"?><sitemapindex %s>%s</sitemapindex>' % (NS, entries)


# ---------------------------------------------------------------- parse_sitemap


def test_a_urlset_lists_its_locs_trimmed_and_unescaped():
    data = urlset("  https://e.com/a\n", "https://e.com/b?x=1&amp;y=2")
    assert parse_sitemap(data) == ("urlset", ["https://e.com/a", "https://e.com/b?x=1&y=2"], "")


def test_a_sitemap_index_lists_child_sitemaps():
    assert parse_sitemap(index("https://e.com/s1.xml", "https://e.com/s2.xml.gz")) == (
        "index",
        ["https://e.com/s1.xml", "https://e.com/s2.xml.gz"],
        "",
    )


def test_a_sitemap_without_namespace_or_with_a_bom_is_read():
    data = b"\xef\xbb\xbf<urlset><url><loc>https://e.com/a</loc></url></urlset>"
    assert parse_sitemap(data) == ("urlset", ["https://e.com/a"], "")


def test_image_and_other_extension_locs_are_not_page_urls():
    data = (
        b'<urlset %s xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        b"<url><loc>https://e.com/a</loc><image:image><image:loc>https://e.com/i.png</image:loc>"
        b"</image:image><image:loc>https://e.com/j.png</image:loc></url></urlset>" % NS
    )
    assert parse_sitemap(data) == ("urlset", ["https://e.com/a"], "")


def test_gzip_is_recognised_by_its_magic_bytes():
    assert parse_sitemap(gzip.compress(urlset("https://e.com/a")))[:2] == (
        "urlset",
        ["https://e.com/a"],
    )


def test_a_plain_text_sitemap_is_a_list_of_urls():
    data = b"https://e.com/a\r\n\r\nnot a url\nhttps://e.com/b\n"
    assert parse_sitemap(data) == ("urlset", ["https://e.com/a", "https://e.com/b"], "")


def test_external_entities_are_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT-7731")
    data = (
        b'<?xml version="1.0"?>\n<!DOCTYPE urlset [\n'
        b'  <!ENTITY xxe SYSTEM "file://%s">\n'
        b'  <!ENTITY remote SYSTEM "http://127.0.0.1:9/evil.dtd">\n]>\n'
        b"<urlset><url><loc>&xxe;</loc></url><url><loc>https://e.com/&xxe;</loc></url>"
        b"<url><loc>&remote;</loc></url><url><loc>https://e.com/ok</loc></url></urlset>"
    ) % str(secret).encode()
    kind, locs, problem = parse_sitemap(data)
    assert "TOP-SECRET" not in repr((kind, locs, problem))
    assert locs == ["https://e.com/ok"]
    assert "3 <loc> entries without a usable URL" in problem


def test_entity_expansion_bomb_is_not_expanded():
    entities = b"".join(
        b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1)) * 10) for i in range(1, 10)
    )
    data = (
        b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY lol0 "lol">%s]>'
        b"<urlset><url><loc>&lol9;</loc></url></urlset>" % entities
    )
    tracemalloc.start()
    started = time.perf_counter()
    try:
        kind, locs, problem = parse_sitemap(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 1.0
    assert peak < 5 * 1024 * 1024
    assert locs == []
    assert "lol" not in "".join(locs)
    assert kind in ("urlset", "invalid")


def test_gzip_bomb_stops_at_the_byte_cap_with_memory_bounded():
    cap = 2 * 1024 * 1024
    bomb = gzip.compress(b"<urlset>" + b" " * (100 * 1024 * 1024) + b"</urlset>", 9)
    assert len(bomb) < 200_000
    tracemalloc.start()
    try:
        kind, locs, problem = parse_sitemap(bomb, max_bytes=cap)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert kind == "invalid"
    assert "decompresses to more than" in problem
    assert peak < 3 * cap


def test_a_plain_file_over_the_byte_cap_is_invalid():
    assert parse_sitemap(urlset(*[f"https://e.com/{i}" for i in range(100)]), max_bytes=1000)[
        ::2
    ] == ("invalid", "larger than 1000 bytes")


def test_truncated_gzip_is_reported_with_the_urls_read_before_the_cut():
    data = gzip.compress(urlset(*[f"https://e.com/{i}" for i in range(2000)]))
    kind, locs, problem = parse_sitemap(data[: len(data) // 2])
    assert kind == "invalid"
    assert "gzip" in problem
    assert locs[:2] == ["https://e.com/0", "https://e.com/1"]


def test_malformed_xml_is_reported_not_raised():
    kind, locs, problem = parse_sitemap(b"<urlset><url><loc>https://e.com/a</loc></url><url><lo")
    assert kind == "invalid"
    assert locs == ["https://e.com/a"]
    assert problem.startswith("malformed XML")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty"),
        (b"  \r\n ", "empty"),
        (b"<!doctype html><html><body>Not found</body></html>", "malformed XML"),
        (b"<html><body>Home</body></html>", "root element <html>"),
        (b"<rss><channel></channel></rss>", "root element <rss>"),
        (b"just some words", "neither XML nor"),
        (b"\x1f\x8b\x08garbage", "corrupt gzip"),
    ],
)
def test_things_that_are_not_sitemaps_are_invalid(data, problem):
    kind, locs, text = parse_sitemap(data)
    assert kind == "invalid"
    assert locs == []
    assert problem in text


def test_the_url_cap_stops_collecting_and_says_so():
    kind, locs, problem = parse_sitemap(
        urlset(*[f"https://e.com/{i}" for i in range(30)]), max_urls=10
    )
    assert kind == "urlset"
    assert len(locs) == 10
    assert "more than 10 URLs" in problem


def test_fifty_thousand_urls_parse_quickly():
    data = urlset(*[f"https://e.com/product/{i}" for i in range(50_000)])
    started = time.perf_counter()
    kind, locs, problem = parse_sitemap(data)
    assert (kind, len(locs), problem) == ("urlset", 50_000, "")
    # About 0.2 s on an idle 2-core machine; the margin absorbs a busy CI box.
    assert time.perf_counter() - started < 4.0


# ---------------------------------------------------------------- over loopback
#
# discover_sitemaps against pytest-httpserver on 127.0.0.1 through the real Fetcher.


@pytest.fixture
def server(httpserver_ipv4):
    return httpserver_ipv4


def fast_fetcher():
    from crawler.fetch import Fetcher, FetchPolicy
    from crawler.net import AddressGuard

    policy = FetchPolicy(
        connect_timeout=1.0,
        read_timeout=1.0,
        deadline=3.0,
        max_retries=0,
        backoff_base=0.01,
        backoff_cap=0.05,
    )
    return Fetcher(policy, AddressGuard(allow_private=True))


def discover(origin: str, robots_sitemaps=(), **kwargs) -> SitemapReport:
    async def go() -> SitemapReport:
        async with fast_fetcher() as fetcher:
            return await discover_sitemaps(fetcher, origin, robots_sitemaps, **kwargs)

    return asyncio.run(go())


def serve(server, path: str, data: bytes, content_type="application/xml", status=200):
    server.expect_request(path).respond_with_data(data, status=status, content_type=content_type)


def requested(server) -> list[str]:
    return [request.path for request, _ in server.log]


def test_loopback_index_with_plain_and_gzip_children_is_collected(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/index.xml", index(f"{origin}/a.xml", f"{origin}/b.xml.gz"))
    serve(server, "/a.xml", urlset(f"{origin}/p1", f"{origin}/p2", f"{origin}/p1#dup"))
    serve(
        server,
        "/b.xml.gz",
        gzip.compress(urlset(f"{origin}/p3", f"{origin.upper()}/p4")),
        content_type="application/x-gzip",
    )
    report = discover(origin, ["/index.xml"])
    assert report.found
    assert report.urls == tuple(f"{origin}/p{i}" for i in (1, 2, 3, 4))
    assert [(f.url.removeprefix(origin), f.kind, f.url_count) for f in report.files] == [
        ("/index.xml", "index", 2),
        ("/a.xml", "urlset", 3),
        ("/b.xml.gz", "urlset", 2),
    ]
    assert all(f.problem == "" for f in report.files)


def test_loopback_sitemap_xml_is_the_fallback_when_robots_names_none(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/sitemap.xml", urlset(f"{origin}/a"))
    report = discover(origin)
    assert report.found
    assert report.urls == (f"{origin}/a",)


@pytest.mark.parametrize(
    ("data", "status", "content_type"),
    [
        (b"Not Found", 404, "text/plain"),
        (b"<!doctype html><html><body>Home page</body></html>", 200, "text/html"),
    ],
)
def test_loopback_no_sitemap_anywhere_is_not_found_and_not_a_broken_file(
    server, data, status, content_type
):
    serve(server, "/sitemap.xml", data, content_type=content_type, status=status)
    report = discover(server.url_for("/").rstrip("/"))
    assert not report.found
    assert report.files == ()
    assert report.urls == ()


def test_loopback_urls_on_another_host_are_reported_not_collected(server):
    origin = server.url_for("/").rstrip("/")
    serve(
        server,
        "/sitemap.xml",
        urlset(
            f"{origin}/mine",
            "https://other.example/theirs",
            origin.replace("http://", "https://") + "/wrong-scheme",
            "javascript:alert(1)",
        ),
    )
    report = discover(origin)
    assert report.urls == (f"{origin}/mine",)
    (file,) = report.files
    assert file.kind == "urlset"
    assert file.url_count == 4
    assert "2 URLs outside" in file.problem
    assert "1 invalid URLs" in file.problem


def test_loopback_unreachable_and_malformed_sitemaps_are_reported_not_fatal(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/gone.xml", b"gone", status=404)
    serve(server, "/broken.xml", b"<urlset><url><loc>" + origin.encode() + b"/a</loc></url><u")
    serve(server, "/good.xml", urlset(f"{origin}/b"))
    report = discover(origin, ["/gone.xml", "/broken.xml", "/good.xml"])
    assert report.found
    kinds = {f.url.removeprefix(origin): (f.kind, f.status) for f in report.files}
    assert kinds == {
        "/gone.xml": ("unreachable", 404),
        "/broken.xml": ("invalid", 200),
        "/good.xml": ("urlset", 200),
    }
    assert report.urls == (f"{origin}/b",)


def test_loopback_file_cap_stops_reading_and_says_so(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/index.xml", index(*[f"{origin}/s{i}.xml" for i in range(10)]))
    for i in range(10):
        serve(server, f"/s{i}.xml", urlset(f"{origin}/p{i}"))
    report = discover(origin, ["/index.xml"], max_files=3)
    assert len(report.files) == 3
    assert len(requested(server)) == 3
    assert any("only 3 sitemap files" in note for note in report.problems)


def test_loopback_url_cap_stops_collecting_and_says_so(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/a.xml", urlset(*[f"{origin}/a{i}" for i in range(4)]))
    serve(server, "/b.xml", urlset(*[f"{origin}/b{i}" for i in range(4)]))
    report = discover(origin, ["/a.xml", "/b.xml"], max_urls=5)
    assert len(report.urls) == 5
    assert report.files[1].problem == ""  # a valid file: the cap is the walk's, and the walk says so
    assert report.problems == ("the cap of 5 sitemap URLs was reached",)


def test_loopback_url_cap_says_how_many_files_it_left_unread(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/a.xml", urlset(*[f"{origin}/a{i}" for i in range(4)]))
    serve(server, "/b.xml", urlset(f"{origin}/b"))
    report = discover(origin, ["/a.xml", "/b.xml"], max_urls=4)
    assert report.problems == ("after the URL cap, 1 more file was not read",)


def test_loopback_nested_indexes_stop_at_depth_three_and_loops_are_read_once(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/i1.xml", index(f"{origin}/i2.xml", f"{origin}/i1.xml"))
    serve(server, "/i2.xml", index(f"{origin}/i3.xml"))
    serve(server, "/i3.xml", index(f"{origin}/i4.xml"))
    serve(server, "/i4.xml", urlset(f"{origin}/deep"))
    report = discover(origin, ["/i1.xml"])
    assert sorted(requested(server)) == ["/i1.xml", "/i2.xml", "/i3.xml"]
    assert "deeper than 3" in report.files[-1].problem
    assert report.urls == ()


def test_loopback_child_sitemaps_on_another_origin_are_not_fetched(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/index.xml", index("https://elsewhere.example/s.xml", f"{origin}/s.xml"))
    serve(server, "/s.xml", urlset(f"{origin}/a"))
    report = discover(origin, ["/index.xml"])
    assert report.urls == (f"{origin}/a",)
    assert "1 sitemaps outside" in report.files[0].problem


def test_loopback_oversized_sitemap_is_invalid(server):
    origin = server.url_for("/").rstrip("/")
    serve(server, "/big.xml", urlset(*[f"{origin}/p{i}" for i in range(2000)]))
    report = discover(origin, ["/big.xml"], max_bytes=10_000)
    (file,) = report.files
    assert file.kind == "invalid"
    assert "10000" in file.problem
    assert report.urls == ()


def test_loopback_gzip_bomb_sitemap_stops_at_the_cap(server):
    origin = server.url_for("/").rstrip("/")
    bomb = gzip.compress(b"<urlset>" + b" " * (40 * 1024 * 1024) + b"</urlset>", 9)
    serve(server, "/bomb.xml.gz", bomb, content_type="application/gzip")
    report = discover(origin, ["/bomb.xml.gz"], max_bytes=1024 * 1024)
    (file,) = report.files
    assert file.kind == "invalid"
    assert "decompresses to more than" in file.problem

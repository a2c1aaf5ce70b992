"""Sitemap parsing on byte fixtures, then discovery against servers on 127.0.0.1."""

from __future__ import annotations

import gzip
import time
import tracemalloc

import pytest

from crawler.sitemap import parse_sitemap

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
    assert time.perf_counter() - started < 2.0

"""A body served as HTML that is binary data (RELIABILITY row 38): headers kept,
the reading stopped at its first bytes, nothing parsed, and the site told why."""

from __future__ import annotations

import asyncio
import codecs

from crawler.charset import SNIFF_BYTES, looks_binary
from crawler.crawl import CrawlLimits, crawl_site
from crawler.fetch import FetchPolicy
from crawler.page import PageOutcome
from tests.crawler.hostile_server import static
from tests.crawler.test_fetch import fetch
from tests.scripted_site import Answer, ScriptedSite, html_page

FAST = FetchPolicy(connect_timeout=2.0, read_timeout=2.0, deadline=5.0)
PDF_START = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nstream\n\x00\x01\x02"
UTF16_PAGE = codecs.BOM_UTF16_LE + "<html><head><title>Wide</title></head><body>wide</body></html>".encode("utf-16-le")


def test_a_file_signature_or_many_control_bytes_mark_binary_data():
    assert looks_binary(PDF_START, None)
    assert looks_binary(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, None)
    assert looks_binary(b"PK\x03\x04" + b"docx", None)
    assert looks_binary(bytes(range(256)) * 6, None)  # random-looking data: a tenth are control bytes
    assert looks_binary(b"\x00" * 2000, None)


def test_text_in_any_html_encoding_is_not_binary_even_with_stray_control_bytes():
    assert not looks_binary(b"<!doctype html>\n<p>tab\tform feed\x0c and ESC \x1b$B for ISO-2022-JP</p>", None)
    assert not looks_binary("<title>日本語</title>".encode("shift_jis") + "<p>テキスト</p>".encode("euc_jp"), None)
    assert not looks_binary("<title>中文</title>".encode("gb18030"), None)
    assert not looks_binary(UTF16_PAGE, None)
    wide = "<p>no BOM</p>".encode("utf-16-be")
    assert not looks_binary(wide, "utf-16be") and not looks_binary(wide, "unicodeFFFE")
    assert not looks_binary("<p>x</p>".encode("utf-32-le") * 20, "utf-16")  # declared wide, read as such
    # A vertical tab pasted from a word processor, a NUL in a title: strays in a page, which is read.
    stray = b"<html><head><title>Line\x0bbreak\x00</title></head><body>" + b"<p>words</p>" * 150
    assert not looks_binary(stray, None)
    # Only the resource header is read: what follows it does not count.
    assert not looks_binary(b"<p>" + b"x" * SNIFF_BYTES + b"\x00" * 500, None)


def test_a_binary_body_served_as_html_is_recorded_from_headers_and_not_read_to_its_end(server):
    result = fetch(server, "/type?ct=text/html&size=2000000")
    assert result.error is None and result.status == 200
    assert result.content_type == "text/html" and result.headers["content-length"] == "2000000"
    assert result.binary and result.body is None
    assert "binary data" in result.error_detail
    assert 0 < result.size < 300_000  # stopped after the first chunks, not the 2 MB


def test_a_short_binary_body_is_caught_at_its_end_too(server):
    server.route("/tiny", static(PDF_START, headers={"Content-Type": "text/html"}))
    result = fetch(server, "/tiny")
    assert result.binary and result.body is None and result.error is None


def test_utf16_html_with_its_bom_is_read_as_html(server):
    server.route("/wide", static(UTF16_PAGE, headers={"Content-Type": "text/html"}))
    result = fetch(server, "/wide")
    assert not result.binary and result.body == UTF16_PAGE


def test_a_body_asked_for_whatever_its_type_is_not_sniffed(server):
    server.route("/blob", static(PDF_START, headers={"Content-Type": "text/html"}))
    result = fetch(server, "/blob", keep_body=True)
    assert result.body == PDF_START and not result.binary


def test_a_crawl_reports_the_binary_page_once_and_judges_no_html_on_it():
    stray = b"<html><head><title>Line\x0bbreak</title></head><body><a href='/'>home</a>\x00</body></html>"
    with ScriptedSite() as web:
        web.pages.update({
            "/": html_page("Home", "/report", "/wide", "/stray"),
            "/stray": Answer(stray, ctype="text/html"),
            "/report": Answer(PDF_START + bytes(range(256)) * 40, ctype="text/html"),
            "/wide": Answer(UTF16_PAGE, ctype="text/html"),
        })
        seen: list[PageOutcome] = []
        report = asyncio.run(crawl_site(web.url("/"), CrawlLimits(allow_private=True, check_external=False),
                                        on_page=seen.append, policy=FAST))
    by_url = {o.url: o for o in seen}
    binary = by_url[web.url("/report")]
    assert binary.facts is None and binary.outlinks == () and binary.result.error is None
    assert [f.code for f in binary.findings] == ["binary_html"]
    assert "binary data" in binary.findings[0].message
    assert by_url[web.url("/wide")].facts.title == "Wide"
    assert "binary_html" not in {f.code for f in by_url[web.url("/wide")].findings}
    assert by_url[web.url("/stray")].facts.title == "Linebreak" and not by_url[web.url("/stray")].result.binary
    assert report.status_counts == {"200": 4}

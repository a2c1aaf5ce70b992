"""Charset labels a page may declare: only the WHATWG Encoding Standard's.

Python knows codecs no browser does (punycode decodes in quadratic time, idna
and undefined raise on any body), so any other label counts as undeclared.
"""

from __future__ import annotations

import time

import pytest

from crawler.charset import decode_html, decode_text
from crawler.parse import parse_html
from crawler.parse_bs4 import parse_html_bs4

PAGE = "http://127.0.0.1/"
BIZARRE = [
    "punycode", "idna", "undefined", "unicode_escape", "raw_unicode_escape", "utf-32",
    "hz", "palmos", "mbcs", "cp65001", "utf-8-sig", "uu", "base64", "rot13", "utf-7",
    "x-user-defined", "iso-2022-kr",
]


@pytest.mark.parametrize("label", BIZARRE)
@pytest.mark.parametrize("where", ["http", "meta"])
def test_a_charset_that_is_not_a_web_encoding_is_undeclared_and_never_raises(label, where):
    html = "<title>café</title><a href='/x'>x</a>"
    if where == "meta":
        body = f'<meta charset="{label}">{html}'.encode()
        http = None
    else:
        body, http = html.encode(), label
    for parse in (parse_html, parse_html_bs4):
        facts = parse(body, PAGE, http_charset=http)
        assert (facts.charset, facts.title, len(facts.links)) == ("utf-8", "café", 1)


def test_a_punycode_declaration_costs_linear_time():
    # 200 KB of punycode digits took 1.7 s to decode (and 10 MB would take hours).
    body = b"<html><head><title>t</title></head><body><a href='/x'>x</a>-" + b"a" * 200_000
    started = time.perf_counter()
    facts = parse_html(body, PAGE, http_charset="punycode")
    assert time.perf_counter() - started < 1.0  # well under the 1.7 s of a quadratic decode, on a loaded machine too
    assert facts.charset == "utf-8"


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("  \"Windows-1252\" ", "cp1252"),
        ("latin1", "cp1252"),
        ("US-ASCII", "cp1252"),
        ("shift_jis", "cp932"),
        ("gbk", "gb18030"),
        ("big5", "big5hkscs"),
        ("koi8-u", "koi8-u"),
        ("iso-8859-8-i", "iso8859-8"),
        ("x-mac-cyrillic", "mac-cyrillic"),
        ("utf-16", "utf-16-le"),
        ("unicode-1-1-utf-8", "utf-8"),
    ],
)
def test_whatwg_labels_name_their_encoding(label, codec):
    text = "<p>x</p>"
    assert decode_html(text.encode(codec), label) == (text, codec)


def test_decode_text_reads_a_declared_web_encoding_a_bom_or_else_detects():
    assert decode_text("café".encode("cp1252"), "ISO-8859-1") == "café"
    assert decode_text(b"\xef\xbb\xbfcaf\xc3\xa9", "windows-1252") == "café"
    assert decode_text("café".encode(), "punycode") == "café"
    assert decode_text("café".encode("cp1252"), None) == "café"
    assert decode_text(b"caf\xff\xfe", "utf-8") == "caf\ufffd\ufffd"
    assert decode_text(b"-" + b"a" * 100_000, "idna").endswith("aaa")

"""A page served without a usable Content-Type is read the way a browser reads it: sniffed as HTML when
it opens like HTML, and a Content-Type missing its ';' still names its type and charset."""

from __future__ import annotations

import pytest

from crawler.checks import CheckSettings, PageContext
from crawler.page import build_outcome
from tests.crawler.hostile_server import HostileServer, head_bytes, send
from tests.crawler.test_fetch_hostile import fetch

PAGE = '<!doctype html><html><head><title>Café</title></head><body><a href="/next">next</a></body></html>'


def serving(body: bytes, headers: list[tuple[str, str]]):
    async def handler(request, reader, writer, server):
        head = head_bytes(200, [*headers, ("Content-Length", str(len(body))), ("Connection", "close")])
        await send(writer, server, request.path, head + (b"" if request.method == "HEAD" else body))
    return handler


@pytest.mark.parametrize("content_type", [None, "", "unknown/unknown", "*/*"])
@pytest.mark.parametrize("opening", ["", "\ufeff", "\n  "])
def test_a_page_with_no_usable_content_type_that_opens_like_html_is_read_as_html(content_type, opening):
    headers = [] if content_type is None else [("Content-Type", content_type)]
    with HostileServer() as server:
        server.route("/page", serving((opening + PAGE).encode(), headers))
        result = fetch(server, "/page")
    assert (result.error, result.content_type) == (None, "text/html")
    assert result.body is not None and b"<title>" in result.body


def test_an_unlabelled_page_is_parsed_and_its_links_followed():
    with HostileServer() as server:
        server.route("/page", serving(PAGE.encode(), []))
        result = fetch(server, "/page")
    outcome = build_outcome(result, server.url("/page"), 0, PageContext(CheckSettings(), lambda url: True))
    assert outcome.facts is not None and outcome.facts.title == "Café"
    assert server.url("/next") in [link.url for link in outcome.outlinks]


@pytest.mark.parametrize("body", [b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, b"just some words, no markup",
                                  b"<html" + b"x" * 100, b'{"json": true}'])
def test_an_unlabelled_body_that_does_not_open_like_html_is_no_page(body):
    with HostileServer() as server:
        server.route("/file", serving(body, []))
        result = fetch(server, "/file")
    assert result.error is None and result.status == 200
    assert (result.content_type, result.body) == ("", None)


def test_a_content_type_missing_its_semicolon_still_names_the_type_and_the_first_charset():
    latin = PAGE.encode("latin-1")
    with HostileServer() as server:
        server.route("/page", serving(latin, [("Content-Type", "text/html charset=ISO-8859-1")]))
        server.route("/two", serving(latin, [("Content-Type", "text/html; charset=latin1; charset=utf-8")]))
        typo, two = fetch(server, "/page"), fetch(server, "/two")
    assert (typo.content_type, typo.charset) == ("text/html", "iso-8859-1")
    assert typo.body == latin
    assert two.charset == "latin1"

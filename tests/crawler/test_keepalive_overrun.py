"""A connection is not reused after an answer that sent more than its
Content-Length: h11 ends the body at the declared length and keeps the
surplus in its buffer, where the next request on that connection would read
it as its own answer (here a whole fake response, ``<title>poison</title>``)."""

from __future__ import annotations

import asyncio

import pytest

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.types import FetchError
from tests.crawler.hostile_server import (
    OK_HTML,
    POISON_HTML,
    HostileServer,
    Sleeps,
    head_bytes,
    response_bytes,
    send,
)

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0, max_retries=0)
POISON = response_bytes(body=POISON_HTML, keep_alive=True)


def overrun(status: int, body: bytes, extra: dict[str, str] | None = None):
    """An answer declaring ``len(body)`` bytes, sent in one write with a whole
    keep-alive response after it."""

    async def handler(request, reader, writer, server) -> bool:
        head = head_bytes(
            status,
            {"Content-Type": "text/html", "Content-Length": str(len(body)),
             "Connection": "keep-alive", **(extra or {})},
        )
        payload = b"" if request.method == "HEAD" else body
        await send(writer, server, request.path, head + payload + POISON)
        return True

    return handler


def first_then_keep_alive(server: HostileServer, path: str, method: str = "GET"):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        # One pool of one connection: a reusable connection is always reused.
        async with Fetcher(POLICY, guard, sleep=Sleeps(), concurrency=1) as fetcher:
            url = server.url(path)
            first = await (fetcher.check(url) if method == "HEAD" else fetcher.fetch(url))
            return first, await fetcher.fetch(server.url("/keep-alive"))

    return asyncio.run(run())


def test_a_body_longer_than_its_content_length_is_never_read_as_the_next_answer(server):
    server.route("/overlong", overrun(200, b"hello"))
    first, second = first_then_keep_alive(server, "/overlong")
    assert (first.status, first.body, first.error) == (200, None, FetchError.PROTOCOL_ERROR)
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.requests["/keep-alive"] == 1
    assert server.connections == 2


def test_a_redirect_whose_drained_body_overruns_closes_its_connection(server):
    server.route("/moved", overrun(302, b"moved", {"Location": "/keep-alive"}))
    first, second = first_then_keep_alive(server, "/moved")
    assert first.status == 200 and first.body == OK_HTML and first.error is None
    assert len(first.redirects) == 1
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.connections == 2


@pytest.mark.parametrize("code", [200, 204])
def test_a_bodiless_answer_followed_by_bytes_closes_its_connection(server, code):
    # Content-Length: 0 promises nothing: what comes anyway is not an answer.
    server.route("/nothing", overrun(code, b""))
    first, second = first_then_keep_alive(server, "/nothing", "HEAD")
    assert first.status == code and first.error is None
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.connections == 2


def test_an_answer_of_exactly_its_content_length_keeps_its_connection(server):
    first, second = first_then_keep_alive(server, "/keep-alive")
    assert first.body == second.body == OK_HTML
    assert server.connections == 1


def test_a_short_binary_body_served_as_html_that_overruns_closes_its_connection(server):
    # Read to its end before the sniff: the surplus check still runs, and names the lie.
    server.route("/report", overrun(200, b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n\x00\x01"))
    first, second = first_then_keep_alive(server, "/report")
    assert first.error is FetchError.PROTOCOL_ERROR and first.body is None
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.connections == 2


def trailing(after: bytes, before: bytes = b"", body: bytes = OK_HTML):
    """An answer of exactly its Content-Length, with ``before`` sent ahead of its head and ``after`` behind its body."""

    async def handler(request, reader, writer, server) -> bool:
        head = head_bytes(200, {"Content-Type": "text/html", "Content-Length": str(len(body)),
                                "Connection": "keep-alive"})
        await send(writer, server, request.path, before + head + body + after)
        return True

    return handler


# Past the first 64 KiB of an answer, where its head is looked for.
LONG_HTML = OK_HTML.replace(b"<p>ok</p>", b"<p>" + b"ok " * 40_000 + b"</p>")


@pytest.mark.parametrize("body", [OK_HTML, LONG_HTML], ids=["short", "long"])
def test_a_stray_line_break_after_a_body_is_not_an_error_but_the_connection_closes(server, body):
    server.route("/crlf", trailing(b"\r\n", body=body))
    first, second = first_then_keep_alive(server, "/crlf")
    assert (first.status, first.body, first.error) == (200, body, None)
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.connections == 2


def test_an_early_hints_answer_before_the_page_is_not_a_surplus(server):
    # A 103's head comes before the final one: the page's own length is kept, and the connection closes.
    server.route("/hints", trailing(b"", before=b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"))
    first, second = first_then_keep_alive(server, "/hints")
    assert (first.status, first.body, first.error) == (200, OK_HTML, None)
    assert (second.status, second.body) == (200, OK_HTML)


def test_a_long_body_longer_than_its_content_length_is_a_protocol_error_too(server):
    server.route("/overlong", overrun(200, LONG_HTML))
    first, second = first_then_keep_alive(server, "/overlong")
    assert (first.status, first.body, first.error) == (200, None, FetchError.PROTOCOL_ERROR)
    assert (second.status, second.body) == (200, OK_HTML)

"""A connection is not reused after an answer that sent more than its
Content-Length: h11 ends the body at the declared length and keeps the
surplus in its buffer, where the next request on that connection would read
it as its own answer (here a whole fake response, ``<title>poison</title>``)."""

from __future__ import annotations

import asyncio

import pytest

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
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
    assert (first.status, first.body, first.error) == (200, b"hello", None)
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.requests["/keep-alive"] == 1
    assert server.connections == 2


def test_a_redirect_whose_drained_body_overruns_closes_its_connection(server):
    server.route("/moved", overrun(302, b"moved", {"Location": "/ok-here"}))
    server.route("/ok-here", overrun(200, OK_HTML))
    first, second = first_then_keep_alive(server, "/moved")
    assert first.status == 200 and first.body == OK_HTML
    assert len(first.redirects) == 1
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.connections == 3


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
    # Read to its end, then found to be a PDF: the surplus check still runs.
    server.route("/report", overrun(200, b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n\x00\x01"))
    first, second = first_then_keep_alive(server, "/report")
    assert first.binary and first.body is None
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.connections == 2

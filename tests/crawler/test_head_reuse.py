"""A body a broken server sends after a HEAD answer is never read as the next answer.

h11 knows a HEAD answer has no body, whatever its Content-Length or
Transfer-Encoding say, and returns the connection to the pool as soon as the
head is read: a HEAD check's connection is reused, as RFC 9112 frames it. A
server that sends the body anyway leaves it in h11's buffer or in the socket,
where the next request on that connection would read it as its own answer:
here, a whole fake response with ``<title>poison</title>``. Bytes already read
close the connection; bytes that arrive while it waits in the pool make it
read as readable, and httpcore drops it.
"""

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


def _check_then_fetch(server: HostileServer, head_path: str, get_path: str, pause: float = 0.0):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        # One pool of one connection: a reusable connection is always reused.
        async with Fetcher(POLICY, guard, sleep=Sleeps(), concurrency=1) as fetcher:
            head = await fetcher.check(server.url(head_path))
            await asyncio.sleep(pause)
            get = await fetcher.fetch(server.url(get_path))
            return head, get

    return asyncio.run(run())


@pytest.mark.parametrize(
    "query, pause",
    [("", 0.0), ("?delay=0.05", 0.3), ("?chunked=1", 0.0), ("?chunked=1&delay=0.05", 0.3)],
    ids=["length-same-read", "length-while-pooled", "chunked-same-read", "chunked-while-pooled"],
)
def test_a_body_sent_after_a_head_answer_is_never_read_as_the_next_answer(server, query, pause):
    head, get = _check_then_fetch(server, f"/head-poison{query}", "/keep-alive", pause)
    assert head.method == "HEAD" and head.status == 200 and head.error is None
    assert get.error is None and get.status == 200
    assert get.body == OK_HTML
    assert b"poison" not in (get.body or b"")
    # The GET went out on a connection of its own, and was really answered.
    assert server.requests["/keep-alive"] == 1
    assert server.connections == 2


def test_the_poison_is_an_answer_a_reused_connection_would_accept(server):
    # Sent as an answer of its own, the poison is a well-formed keep-alive 200:
    # the tests above pass because the connection is closed, not because h11
    # would have refused what the server sent.
    async def poison(request, reader, writer, server) -> bool:
        await send(writer, server, request.path, response_bytes(body=POISON_HTML, keep_alive=True))
        return True

    server.route("/poison", poison)
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps(), concurrency=1) as fetcher:
            return [await fetcher.fetch(server.url(path)) for path in ("/poison", "/keep-alive")]

    first, second = asyncio.run(run())
    assert (first.status, first.body) == (200, POISON_HTML)
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.connections == 1


def test_a_head_answer_declaring_no_body_keeps_its_connection(server):
    # Content-Length: 0 promises nothing to come: the connection is reused.
    head, get = _check_then_fetch(server, "/head-poison?size=0", "/keep-alive")
    assert head.status == 200 and get.body == OK_HTML
    assert server.connections == 1


def test_a_plain_head_answer_keeps_its_connection_for_the_next_request(server):
    # A HEAD answer normally carries its page's Content-Length (nginx, Apache):
    # a resource check must not cost a connect of its own.
    head, get = _check_then_fetch(server, "/keep-alive", "/keep-alive")
    assert head.status == 200 and head.method == "HEAD"
    assert get.status == 200 and get.body == OK_HTML
    assert server.requests["/keep-alive"] == 2 and server.connections == 1


@pytest.mark.parametrize("code", [204, 304])
def test_a_body_sent_after_a_204_or_304_is_never_read_as_the_next_answer(server, code):
    # h11 treats 204 and 304 as bodiless too, whatever they declare.
    async def no_content(request, reader, writer, server) -> bool:
        poison = response_bytes(body=POISON_HTML, keep_alive=True)
        head = head_bytes(
            code,
            {"Content-Type": "text/html", "Content-Length": str(len(poison)),
             "Connection": "keep-alive"},
        )
        await send(writer, server, request.path, head + poison)
        return True

    server.route("/no-content", no_content)
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps(), concurrency=1) as fetcher:
            return [await fetcher.fetch(server.url(path)) for path in ("/no-content", "/keep-alive")]

    first, second = asyncio.run(run())
    assert first.status == code and first.error is None and first.body == b""
    assert (second.status, second.body) == (200, OK_HTML)
    assert server.connections == 2

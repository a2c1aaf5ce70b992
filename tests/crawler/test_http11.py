"""The fetcher's keep-alive HTTP/1.1 pool (crawler.http11) against loopback servers:
which connections it reuses, which it drops, and the one request it sends twice."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest

from crawler import http11
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard, GuardedBackend
from crawler.netstream import AsyncioBackend
from crawler.types import FetchError
from tests.crawler.hostile_server import (
    OK_HTML,
    HostileServer,
    Sleeps,
    head_bytes,
    respond,
    response_bytes,
    send,
)

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0, max_retries=0)


@pytest.fixture
def server():
    with HostileServer() as running:
        yield running


class CountingBackend(AsyncioBackend):
    """netstream's backend, counting the requests written on its connections."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    async def connect_tcp(self, *args, **kwargs):
        stream = await super().connect_tcp(*args, **kwargs)
        backend, write = self, stream.write

        async def counted(buffer, timeout=None):
            backend.writes += 1
            await write(buffer, timeout)

        stream.write = counted
        return stream


def _run(server: HostileServer, steps, backend=None):
    """Run ``steps(fetcher)`` with one Fetcher, so its connections can be reused."""
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps(), concurrency=4, network_backend=backend) as fetcher:
            return await steps(fetcher)

    return asyncio.run(run())


def _second_request_hangs_up(first_connection_only: bool = False):
    """Answer a connection's first request and keep it open; close it on the
    next one without a word, as a server whose keep-alive timer fired does.
    With ``first_connection_only``, every later connection is hung up on too."""
    answered: set[int] = set()

    async def handler(request, reader, writer, server) -> bool:
        key = id(writer)
        if key in answered or (first_connection_only and answered):
            return False  # the server closes the connection without answering
        answered.add(key)
        return await respond(request, writer, server, body=OK_HTML, keep_alive=True)

    return handler


def test_a_request_lost_on_a_reused_connection_is_sent_once_more_on_a_new_one(server):
    server.route("/race", _second_request_hangs_up())

    async def steps(fetcher):
        return [await fetcher.fetch(server.url("/race")), await fetcher.check(server.url("/race"))]

    first, second = _run(server, steps)
    assert (first.status, second.status) == (200, 200)
    # The second request went out twice, once on the dead connection, but it is
    # one attempt: the site did nothing wrong.
    assert second.attempts == 1 and second.error is None
    assert server.requests["/race"] == 3 and server.connections == 2


def test_a_request_is_resent_only_once_and_a_new_connection_is_never_retried(server):
    server.route("/race", _second_request_hangs_up(first_connection_only=True))

    async def steps(fetcher):
        return [await fetcher.fetch(server.url("/race")), await fetcher.fetch(server.url("/race"))]

    first, second = _run(server, steps)
    assert first.status == 200
    assert second.error is FetchError.CONNECT_FAILED
    assert "without answering" in second.error_detail
    assert server.requests["/race"] == 3 and server.connections == 2


def test_an_idle_connection_past_its_keep_alive_expiry_is_not_reused(server, monkeypatch):
    monkeypatch.setattr(http11, "KEEPALIVE_EXPIRY", 0.05)

    async def steps(fetcher):
        first = await fetcher.fetch(server.url("/keep-alive"))
        await asyncio.sleep(0.15)
        return [first, await fetcher.fetch(server.url("/keep-alive"))]

    results = _run(server, steps)
    assert [r.status for r in results] == [200, 200]
    assert server.connections == 2


def test_an_idle_connection_the_server_closed_is_dropped_before_it_is_used(server):
    async def answer_then_close(request, reader, writer, server) -> bool:
        await respond(request, writer, server, body=OK_HTML, keep_alive=True)
        return False  # it promised keep-alive, then hangs up anyway

    server.route("/closes", answer_then_close)

    async def steps(fetcher):
        first = await fetcher.fetch(server.url("/closes"))
        await asyncio.sleep(0.1)  # the event loop sees the FIN while the connection is idle
        return [first, await fetcher.fetch(server.url("/closes"))]

    backend = CountingBackend()
    results = _run(server, steps, backend)
    assert [(r.status, r.attempts) for r in results] == [(200, 1), (200, 1)]
    assert server.connections == 2 and server.requests["/closes"] == 2
    assert backend.writes == 2  # nothing was sent on the closed connection


def test_informational_answers_before_the_response_are_skipped(server):
    async def early_hints(request, reader, writer, server) -> bool:
        await send(writer, server, request.path, head_bytes(103, {"Link": "</a.css>; rel=preload"}))
        return await respond(request, writer, server, body=OK_HTML, keep_alive=True)

    server.route("/hints", early_hints)

    async def steps(fetcher):
        return [await fetcher.fetch(server.url("/hints")), await fetcher.fetch(server.url("/hints"))]

    results = _run(server, steps)
    assert [r.status for r in results] == [200, 200]
    assert all(r.body == OK_HTML for r in results)
    assert server.connections == 1


def test_header_values_are_read_as_ascii_then_utf8_then_latin1(server):
    # head_bytes writes Latin-1: "Ã©" goes out as the two UTF-8 bytes of "é",
    # while "\xe9" goes out as one byte that is not UTF-8.
    headers = {"X-Utf8": "caf\xc3\xa9", "X-Latin1": "caf\xe9", "X-Ascii": "cafe"}

    async def odd_headers(request, reader, writer, server) -> bool:
        return await respond(request, writer, server, body=OK_HTML, headers=headers)

    server.route("/odd", odd_headers)
    (result,) = _run(server, lambda fetcher: asyncio.gather(fetcher.fetch(server.url("/odd"))))
    assert result.headers["x-utf8"] == "café"
    assert result.headers["x-latin1"] == "café"
    assert result.headers["x-ascii"] == "cafe"


def _slow(seconds: float):
    """A handler answering after ``seconds``, keeping the connection open."""

    async def handler(request, reader, writer, server) -> bool:
        await asyncio.sleep(seconds)
        return await respond(request, writer, server, body=OK_HTML, keep_alive=True)

    return handler


def test_idle_connections_beyond_the_cap_are_closed(server):
    # A cap of four idle connections: after eight requests at once, eight more
    # at once reuse four and dial four.
    server.route("/slow", _slow(0.2))
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        pool = http11.Pool(
            GuardedBackend(guard),
            ssl.create_default_context(),
            connect_timeout=1.0,
            read_timeout=1.0,
            write_timeout=1.0,
            max_idle=4,
        )

        async def one():
            response = await pool.send(b"GET", httpx.URL(server.url("/slow")), [])
            async for _ in response:
                pass
            await response.aclose()
            return response.status

        try:
            first = await asyncio.gather(*(one() for _ in range(8)))
            second = await asyncio.gather(*(one() for _ in range(8)))
        finally:
            await pool.aclose()
        return first + second

    assert asyncio.run(run()) == [200] * 16
    assert server.connections == 12


async def _settle(condition, seconds: float = 2.0) -> None:
    """Wait until the server threads have seen what the client did."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)


def test_a_connection_is_not_reused_when_the_server_sent_more_than_its_answer(server):
    # A body after a HEAD answer, and a whole second answer after a GET's: the
    # next request on that connection would read those bytes as its answer.
    async def head_with_body(request, reader, writer, server) -> bool:
        head = head_bytes(200, {"Content-Length": str(len(OK_HTML)), "Connection": "keep-alive"})
        await send(writer, server, request.path, head + OK_HTML)
        return True

    async def two_answers(request, reader, writer, server) -> bool:
        injected = b"<html>INJECTED</html>"
        extra = head_bytes(200, {"Content-Length": str(len(injected))}) + injected
        answer = response_bytes(body=OK_HTML, keep_alive=True)
        # One write, as for the HEAD: sent apart, the second answer could reach
        # the client (the server runs in another thread) only after it had
        # checked the connection out again, and the test would race.
        await send(writer, server, request.path, answer + extra)
        return True

    server.route("/head-body", head_with_body)
    server.route("/two", two_answers)

    async def steps(fetcher):
        head = await fetcher.check(server.url("/head-body"))
        after_head = await fetcher.fetch(server.url("/keep-alive"))
        two = await fetcher.fetch(server.url("/two"))
        after_two = await fetcher.fetch(server.url("/keep-alive"))
        return [head, after_head, two, after_two]

    results = _run(server, steps)
    assert [(r.status, r.error) for r in results] == [(200, None)] * 4
    assert results[1].body == OK_HTML and results[3].body == OK_HTML


def test_idle_connections_are_capped_across_origins_not_per_origin():
    # Concurrency 2 keeps two idle connections in all: a crawl checking links
    # to thousands of hosts must not hold a socket open to each.
    servers = [HostileServer().start() for _ in range(4)]
    try:
        guard = AddressGuard(allowed_targets=[("127.0.0.1", s.port) for s in servers])

        async def run():
            async with Fetcher(POLICY, guard, sleep=Sleeps(), concurrency=2) as fetcher:
                results = [await fetcher.fetch(s.url("/keep-alive")) for s in servers]
                await _settle(lambda: sum(s.open for s in servers) <= 2)
                return results, [s.open for s in servers]

        results, still_open = asyncio.run(run())
        assert [r.status for r in results] == [200] * 4
        assert still_open == [0, 0, 1, 1]  # the two most recent stay
    finally:
        for running in servers:
            running.stop()


def test_expired_idle_connections_are_closed_even_if_their_origin_is_never_asked_again(monkeypatch):
    monkeypatch.setattr(http11, "KEEPALIVE_EXPIRY", 0.05)
    with HostileServer() as first, HostileServer() as second:
        guard = AddressGuard(allowed_targets=[("127.0.0.1", first.port), ("127.0.0.1", second.port)])

        async def run():
            async with Fetcher(POLICY, guard, sleep=Sleeps(), concurrency=4) as fetcher:
                await asyncio.gather(*(fetcher.fetch(first.url("/keep-alive")) for _ in range(3)))
                open_before = first.open
                await asyncio.sleep(0.1)
                await fetcher.fetch(second.url("/keep-alive"))
                await _settle(lambda: first.open == 0)
                return open_before, first.open

        assert asyncio.run(run()) == (3, 0)


def test_an_answer_finished_after_the_pool_closed_closes_its_connection(server):
    server.route("/slow", _slow(0.3))
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        fetcher = Fetcher(POLICY, guard, sleep=Sleeps())
        in_flight = asyncio.ensure_future(fetcher.fetch(server.url("/slow")))
        await asyncio.sleep(0.1)
        await fetcher.aclose()
        result = await in_flight
        await _settle(lambda: server.open == 0)
        return result, server.open

    result, still_open = asyncio.run(run())
    assert result.status == 200
    assert still_open == 0

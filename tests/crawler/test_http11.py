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
from tests.crawler.hostile_server import OK_HTML, HostileServer, Sleeps, head_bytes, respond, send

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0, max_retries=0)


@pytest.fixture
def server():
    with HostileServer() as running:
        yield running


class CountingBackend(AsyncioBackend):
    """netstream's backend, counting the requests written on its connections."""

    def __init__(self) -> None:
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


def test_idle_connections_beyond_the_cap_are_closed(server):
    # Concurrency 4 keeps at most four idle connections to an origin: after
    # eight requests at once, eight more at once reuse four and dial four.
    async def slow(request, reader, writer, server) -> bool:
        await asyncio.sleep(0.2)
        return await respond(request, writer, server, body=OK_HTML, keep_alive=True)

    server.route("/slow", slow)
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        pool = http11.Pool(
            GuardedBackend(guard),
            ssl.create_default_context(),
            connect_timeout=1.0,
            read_timeout=1.0,
            write_timeout=1.0,
            max_idle_per_origin=4,
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

"""The pool's HTTP/1.1 response codec (crawler.http11) against raw loopback answers:
how bodies are framed, which heads it reads, which it refuses, and when a
connection may carry the next request."""

from __future__ import annotations

import asyncio
import ssl
import time

import httpx
import pytest

from crawler import http11
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard, GuardedBackend
from crawler.types import FetchError
from tests.crawler.hostile_server import HostileServer, Sleeps, send

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0, max_retries=0)
PAGE = b"<html><head><title>t</title></head><body>hello</body></html>"


@pytest.fixture
def server():
    with HostileServer() as running:
        yield running


def _answer(data: bytes, *, keep_alive: bool = False):
    """A handler that writes ``data`` as it is; the server closes unless ``keep_alive``."""

    async def handler(request, reader, writer, server) -> bool:
        await send(writer, server, request.path, data)
        return keep_alive

    return handler


def _fetch_twice(server: HostileServer, path: str):
    """Two fetches of ``path`` with one Fetcher, so the second may reuse the first's connection."""
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps(), concurrency=1) as fetcher:
            return [await fetcher.fetch(server.url(path)), await fetcher.fetch(server.url(path))]

    return asyncio.run(run())


def _chunked(*pieces: bytes, extension: bytes = b"", trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in pieces)
    return body + b"0\r\n" + trailer + b"\r\n"


def test_a_chunked_body_with_extensions_and_trailers_is_read_whole_and_the_connection_reused(server):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = _chunked(PAGE[:10], PAGE[10:30], PAGE[30:], extension=b";name=value", trailer=b"X-Checksum: 1\r\n")
    server.route("/chunked", _answer(head + body, keep_alive=True))
    results = _fetch_twice(server, "/chunked")
    assert [(r.status, r.error, r.body) for r in results] == [(200, None, PAGE)] * 2
    assert server.connections == 1


def test_a_body_without_a_declared_length_is_read_to_the_close_and_the_connection_not_reused(server):
    server.route("/to-close", _answer(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + PAGE))
    results = _fetch_twice(server, "/to-close")
    assert [(r.status, r.error, r.body) for r in results] == [(200, None, PAGE)] * 2
    assert server.connections == 2


@pytest.mark.parametrize(
    "version, connection, connections",
    [
        ("1.1", "close", 2),  # 1.1 keeps alive unless it says close
        ("1.0", "Keep-Alive", 1),  # 1.0 closes unless it says keep-alive
    ],
)
def test_the_connection_header_decides_whether_the_next_request_reuses_the_connection(
        server, version, connection, connections):
    head = (f"HTTP/{version} 200 OK\r\nContent-Type: text/html\r\nConnection: {connection}\r\n"
            f"Content-Length: {len(PAGE)}\r\n\r\n").encode()
    # The server keeps the socket open either way: only the header decides.
    server.route("/conn", _answer(head + PAGE, keep_alive=True))
    results = _fetch_twice(server, "/conn")
    assert [r.body for r in results] == [PAGE, PAGE]
    assert server.connections == connections


def test_bare_line_feeds_folded_fields_and_repeated_equal_lengths_are_read(server):
    head = (b"HTTP/1.1 200 OK\nContent-Type: text/html\nX-Folded: first\n\t second\n"
            b"Content-Length: %d, %d\n\n")
    server.route("/lenient", _answer(head % (len(PAGE), len(PAGE)) + PAGE))
    result = _fetch_twice(server, "/lenient")[0]
    assert (result.status, result.error, result.body) == (200, None, PAGE)
    assert result.headers["x-folded"] == "first second"


@pytest.mark.parametrize(
    "head, detail",
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx", "unsupported Transfer-Encoding"),
        (b"HTTP/1.1 200 OK\r\nBad Header: x\r\nContent-Length: 0\r\n\r\n", "illegal header line"),
        (b"HTTP/1.1 200 OK\r\nX-Nul: a\x00b\r\nContent-Length: 0\r\n\r\n", "illegal header line"),
        (b"HTTP/1.1 200 OK\r\nX-Ff: a\x0cb\r\nContent-Length: 0\r\n\r\n", "illegal header line"),
        (b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", "illegal status line"),
        (b"HTTP/1.1 099 Early\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "illegal status code 99"),
        (b"\x15\x03\x03\x00\x02\x02\x46", "illegal status line"),  # a TLS alert: answered at once, no wait
        (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "switched protocols"),
        (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
         "missing line ending"),
    ],
)
def test_malformed_framing_is_a_protocol_error_naming_the_fault(server, head, detail):
    server.route("/bad", _answer(head))
    result = _fetch_twice(server, "/bad")[0]
    assert result.error is FetchError.PROTOCOL_ERROR
    assert result.error_detail.startswith("Malformed HTTP response: ")
    assert detail in result.error_detail
    assert result.body is None


def test_endless_informational_answers_are_refused_not_followed(server):
    server.route("/continue", _answer(b"HTTP/1.1 100 Continue\r\n\r\n" * 50 + b"HTTP/1.1 200 OK\r\n\r\n"))
    result = _fetch_twice(server, "/continue")[0]
    assert result.error is FetchError.PROTOCOL_ERROR
    assert "informational" in result.error_detail


def test_a_chunk_size_line_past_the_head_cap_is_refused(server):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
    server.route("/long-chunk-line", _answer(head + b"5;" + b"x" * (http11.MAX_HEAD_BYTES + 10) + b"\r\nhello"))
    result = _fetch_twice(server, "/long-chunk-line")[0]
    assert result.error is FetchError.PROTOCOL_ERROR
    assert "chunk size line or trailer is longer than 100 KB" in result.error_detail


def test_a_chunked_body_cut_short_is_an_incomplete_body(server):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
    server.route("/cut", _answer(head + b"20\r\nonly ten b"))
    result = _fetch_twice(server, "/cut")[0]
    assert result.error is FetchError.INCOMPLETE_BODY
    assert result.body is None


def test_a_line_ending_in_a_request_field_is_refused_before_anything_is_sent(server):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        pool = http11.Pool(GuardedBackend(guard), ssl.create_default_context(), connect_timeout=1.0,
                           read_timeout=1.0, write_timeout=1.0, max_idle=1)
        try:
            await pool.send(b"GET", httpx.URL(server.url("/ok")), [(b"User-Agent", b"x\r\nX-Injected: 1")])
        finally:
            await pool.aclose()

    with pytest.raises(httpx.LocalProtocolError):
        asyncio.run(run())
    assert server.connections == 0


def test_control_bytes_h11_accepted_in_values_and_reasons_are_still_accepted(server):
    head = b"HTTP/1.1 200 Odd\x1b reason\r\nContent-Type: text/html\r\nX-Odd: a\x01b\x7f\r\nContent-Length: %d\r\n\r\n"
    server.route("/odd", _answer(head % len(PAGE) + PAGE))
    result = _fetch_twice(server, "/odd")[0]
    assert (result.status, result.error, result.body) == (200, None, PAGE)


@pytest.mark.parametrize(
    "line",
    [
        b"X-Spaces: a" + b" " * 90_000 + b"b",  # valid: spaces inside a value
        b"X-Spaces:" + b" " * 90_000 + b"\x00",  # invalid after a long run of spaces
        b"X-Tabs: \t" * 30_000,
    ],
)
def test_long_runs_of_whitespace_in_a_field_are_read_in_linear_time(server, line):
    # A pattern with optional spaces around a lazy value backtracked for minutes on these.
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + line + b"\r\nContent-Length: %d\r\n\r\n"
    server.route("/spaces", _answer(head % len(PAGE) + PAGE))
    started = time.monotonic()
    result = _fetch_twice(server, "/spaces")[0]
    assert time.monotonic() - started < 1.5
    assert result.error in (None, FetchError.PROTOCOL_ERROR)


def test_many_folded_lines_are_joined_in_linear_time(server):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Folded: start\r\n" + b" more\r\n" * 12_000
    server.route("/folds", _answer(head + b"Content-Length: %d\r\n\r\n" % len(PAGE) + PAGE))
    started = time.monotonic()
    result = _fetch_twice(server, "/folds")[0]
    assert time.monotonic() - started < 1.5
    assert result.body == PAGE and result.headers["x-folded"] == "start" + " more" * 12_000

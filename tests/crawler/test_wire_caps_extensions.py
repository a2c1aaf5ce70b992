"""Body caps count the bytes on the wire, chunk framing and chunk extensions
included: a chunked body made almost entirely of framing ends at the wire cap
(or, where h11 refuses one oversized framing line, as a protocol error) after
a bounded number of bytes and a bounded time.

The bytes the client really read are counted below the fetcher, by a backend
that wraps every connection it dials, so the bound is proven on what came off
the socket and not on what the fetcher chose to report."""

from __future__ import annotations

import asyncio
import time

import httpcore
import pytest

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard, CountingStream
from crawler.types import FetchError
from tests.crawler.hostile_server import HostileServer, Sleeps, endless_framing

KiB = 1024
MiB = 1024 * KiB
CAP = 1 * MiB
POLICY = FetchPolicy(
    connect_timeout=1.0, read_timeout=1.0, deadline=10.0, max_body_bytes=CAP, max_retries=0
)
# h11 buffers at most this much of one unfinished framing line or header block
# (httpcore's MAX_INCOMPLETE_EVENT_SIZE); httpcore reads 64 KiB at a time.
H11_EVENT_LIMIT = 100 * KiB
READ_SIZE = 64 * KiB
# What the client may read past the cap: the rest of one framing event, and
# the read that completed it.
SLACK = H11_EVENT_LIMIT + 2 * READ_SIZE
# Socket buffers on both sides hold a few MB at most; a client that kept
# reading would drain the server's whole 1 GiB.
SERVER_SENT_BOUND = 32 * MiB


class WireCounter(httpcore.AsyncNetworkBackend):
    """Dials loopback only and counts every byte read from every connection."""

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.streams: list[CountingStream] = []

    @property
    def bytes_read(self) -> int:
        return sum(stream.bytes_read for stream in self.streams)

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        assert host.startswith("127."), host
        stream = CountingStream(
            await self.inner.connect_tcp(
                host,
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )
        )
        self.streams.append(stream)
        return stream

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def _fetch(server: HostileServer, path: str, **kwargs):
    wire = WireCounter()
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps(), network_backend=wire) as fetcher:
            return await fetcher.fetch(server.url(path), **kwargs)

    started = time.monotonic()
    result = asyncio.run(run())
    return result, wire.bytes_read, time.monotonic() - started


@pytest.mark.parametrize("keep_body", [True, None])
def test_90kb_chunk_extensions_around_1_byte_chunks_end_at_the_wire_cap(server, keep_body):
    # b"1;" + b"x" * 90_000 + b"\r\na\r\n", over and over: one byte of body
    # for every 90 KB on the wire. Counting the body alone, the cap would be
    # reached after 95 GB; the deadline (10 s) would end it long after
    # gigabytes had been read.
    result, wire_bytes, took = _fetch(server, "/chunk-extensions?ext=90000", keep_body=keep_body)
    assert result.error is FetchError.BODY_TOO_LARGE
    assert result.status == 200
    assert CAP < result.size <= CAP + SLACK
    assert wire_bytes <= CAP + SLACK + 4 * KiB  # plus the response head
    if keep_body:
        # What was kept is the prefix the cap allowed: a dozen one-byte chunks.
        assert result.body == b"a" * len(result.body) and len(result.body) <= 20
    else:
        assert result.body is None
    assert server.bytes_sent["/chunk-extensions"] < SERVER_SENT_BOUND
    assert server.requests["/chunk-extensions"] == 1
    assert took < POLICY.deadline / 2  # cut by a cap, far from the deadline


@pytest.mark.parametrize(
    ("prefix", "filler"),
    [
        # One chunk extension longer than h11 buffers for a line.
        (b"1;", b"x" * 4096),
        # A chunk-size line that is all leading zeros.
        (b"", b"0" * 4096),
        # A trailer section that never ends, in well-formed little lines.
        (b"1\r\na\r\n0\r\n", b"X-Trailer: yyyyyyyyyyyyyyyy\r\n"),
    ],
    ids=["endless-extension", "endless-chunk-size", "endless-trailers"],
)
def test_an_endless_framing_line_is_a_protocol_error_after_a_bounded_read(server, prefix, filler):
    server.route("/framing", endless_framing(prefix, filler))
    result, wire_bytes, took = _fetch(server, "/framing", keep_body=True)
    assert result.error is FetchError.PROTOCOL_ERROR, result.error_detail
    assert result.body is None
    assert wire_bytes <= H11_EVENT_LIMIT + 2 * READ_SIZE + 4 * KiB
    assert server.bytes_sent["/framing"] < SERVER_SENT_BOUND
    assert took < POLICY.deadline / 2  # cut by a cap, far from the deadline


def test_extensions_just_under_h11s_line_limit_still_end_at_the_wire_cap(server):
    # 100 KiB less a little: the longest extension h11 accepts, so the most
    # framing per event the client can be made to read.
    result, wire_bytes, took = _fetch(server, "/chunk-extensions?ext=102000", keep_body=True)
    assert result.error is FetchError.BODY_TOO_LARGE
    assert CAP < result.size <= CAP + SLACK
    assert wire_bytes <= CAP + SLACK + 4 * KiB
    assert took < POLICY.deadline / 2  # cut by a cap, far from the deadline

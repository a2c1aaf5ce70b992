"""Hostile servers (RELIABILITY.md rows 15-27 and 43): each fault ends in a
named outcome, on time, without hammering the server or holding more memory
than the caps allow."""

from __future__ import annotations

import asyncio
import socket
import time
import tracemalloc
import zlib

import httpcore
import pytest

from crawler import drain
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.types import FetchError
from tests.crawler.hostile_server import (
    OK_HTML,
    HostileServer,
    Request,
    Sleeps,
    SpyBackend,
    StubResolver,
    head_bytes,
    redirect_to,
    respond,
    send,
    static,
)

KiB = 1024
MiB = 1024 * KiB
# Socket reads, the pool's receive buffer and zlib's window: fixed, not per byte.
NETWORK_BUFFERS = 1 * MiB
POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=2.0)


def fetch(
    server: HostileServer,
    path: str,
    *,
    policy: FetchPolicy = POLICY,
    sleep=None,
    guard=None,
    **kwargs,
):
    guard = guard or AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(policy, guard, sleep=sleep or Sleeps()) as fetcher:
            return await fetcher.fetch(server.url(path), **kwargs)

    return asyncio.run(run())


def timed_fetch(server: HostileServer, path: str, **kwargs):
    started = time.monotonic()
    result = fetch(server, path, **kwargs)
    return result, time.monotonic() - started


def traced_fetch(server: HostileServer, path: str, *, policy: FetchPolicy = POLICY, **kwargs):
    """The result and the peak of Python memory allocated while fetching.

    Measured inside the event loop: asyncio.run's teardown reprs the finished
    task's result (several times the body's size), which is not the fetcher's.
    """
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(policy, guard, sleep=Sleeps()) as fetcher:
            await fetcher.fetch(server.url("/ok"))  # imports and pools warmed up
            tracemalloc.start()
            try:
                result = await fetcher.fetch(server.url(path), **kwargs)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            return result, peak

    return asyncio.run(run())


def _zeros_compressed(size: int, wbits: int, fill: bytes = b"\0") -> bytes:
    # Built in 1 MiB steps so the test itself never holds the expanded bomb.
    compressor = zlib.compressobj(1, zlib.DEFLATED, wbits)
    block = fill * MiB
    parts = [compressor.compress(block) for _ in range(size // MiB)]
    parts.append(compressor.flush())
    return b"".join(parts)


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    """Bombs of spaces, which read as text: a bomb of NUL bytes served as HTML
    stops at its first bytes, as binary data, before any cap."""
    gzip_200 = _zeros_compressed(200 * MiB, 31, b" ")
    return {
        "gzip": _zeros_compressed(64 * MiB, 31, b" "),
        "deflate": _zeros_compressed(64 * MiB, 15, b" "),
        "gzip, gzip": _gzip(gzip_200),
    }


def _gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


# -- slow and silent servers (rows 15, 16, 17, 18) ---------------------------------------------


def test_tarpit_is_cut_at_the_deadline(server):
    # One byte every 0.3 s never trips the 1 s read timeout; only the 2 s
    # total deadline stops it, and a tarpit is not worth a second attempt.
    result, _ = timed_fetch(server, "/drip?interval=0.3&size=5000")
    assert result.error is FetchError.DEADLINE_EXCEEDED
    assert POLICY.deadline - 1 <= result.elapsed <= POLICY.deadline + 1  # the fetch's own clock
    assert result.body is None
    assert server.requests["/drip"] == 1


def test_a_server_that_never_answers_is_a_read_timeout_retried_with_backoff(server):
    sleeps = Sleeps()
    policy = FetchPolicy(read_timeout=0.3, deadline=2.0, max_retries=2)
    result, took = timed_fetch(server, "/hang", policy=policy, sleep=sleeps)
    assert result.error is FetchError.READ_TIMEOUT
    assert server.requests["/hang"] == 3 and result.attempts == 3
    assert 0.9 <= took < 2.5
    assert len(sleeps.calls) == 2 and sleeps.calls[0] < sleeps.calls[1] <= 1.0


def test_a_server_that_closes_without_answering_is_a_connect_failure_retried(server):
    async def hang_up(request: Request, reader, writer, server) -> None:
        return None  # the request was read; the connection closes with no answer

    server.route("/hang-up", hang_up)
    sleeps = Sleeps()
    result, took = timed_fetch(server, "/hang-up", sleep=sleeps)
    assert result.error is FetchError.CONNECT_FAILED
    assert "without answering" in result.error_detail
    assert server.requests["/hang-up"] == 1 + POLICY.max_retries and len(sleeps.calls) == 2
    assert took < POLICY.deadline  # three quick failures, not one wait for the deadline


def test_a_refused_connection_fails_quickly():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The port is closed now; connecting to it is refused at once.
    guard = AddressGuard(allowed_targets=[("127.0.0.1", port)])
    sleeps = Sleeps()

    async def run():
        async with Fetcher(POLICY, guard, sleep=sleeps) as fetcher:
            return await fetcher.fetch(f"http://127.0.0.1:{port}/")

    started = time.monotonic()
    result = asyncio.run(run())
    assert result.error is FetchError.CONNECT_FAILED
    assert result.error_detail == "Could not connect: Connection refused"
    assert time.monotonic() - started < 1.0
    assert result.attempts == 3 and len(sleeps.calls) == 2


def test_a_black_holed_connect_is_a_connect_timeout():
    class BlackHole(SpyBackend):
        async def connect_tcp(
            self, host, port, timeout=None, local_address=None, socket_options=None
        ):
            self.dialed.append((host, port))
            await asyncio.sleep(timeout or 0)
            raise httpcore.ConnectTimeout("SYN went nowhere")

    hole = BlackHole()
    guard = AddressGuard(resolver=StubResolver({"hole.test": [["93.184.216.34"]]}))
    policy = FetchPolicy(connect_timeout=0.2, max_retries=1)

    async def run():
        async with Fetcher(policy, guard, sleep=Sleeps(), network_backend=hole) as fetcher:
            return await fetcher.fetch("http://hole.test/")

    result = asyncio.run(run())
    assert result.error is FetchError.CONNECT_TIMEOUT
    assert hole.dialed == [("93.184.216.34", 80)] * 2


@pytest.mark.parametrize("path", ["/reset", "/short"])
def test_a_body_cut_short_is_incomplete_and_never_kept(server, path):
    # /reset sends half the declared body then a TCP RST, /short a clean FIN.
    result = fetch(server, f"{path}?declared=4000&send=2000")
    assert result.error is FetchError.INCOMPLETE_BODY
    assert result.status == 200
    assert result.body is None
    assert result.size == 2000
    assert server.requests[path] == 1 + POLICY.max_retries


def test_a_cut_body_with_no_budget_left_for_a_retry_keeps_its_status_and_error(server):
    # Any backoff (at least 0.25 s) overruns a 0.2 s budget; the sleep is real,
    # so a retry slept anyway would end the fetch as DeadlineExceeded.
    policy = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=1.0, total_budget=0.2)
    result = fetch(server, "/short?declared=4000&send=2000", policy=policy, sleep=asyncio.sleep)
    assert (result.status, result.error) == (200, FetchError.INCOMPLETE_BODY)
    assert server.requests["/short"] == 1


# -- too much data (rows 19, 21) ---------------------------------------------------------------------


def test_a_declared_2gb_body_stops_right_after_the_headers(server):
    result, took = timed_fetch(server, "/declared-huge")
    assert result.error is FetchError.BODY_TOO_LARGE
    assert "2147483648" in result.error_detail
    assert result.size == 0 and result.body is None
    assert took < POLICY.deadline  # cut at the head, not by the deadline


def test_an_endless_chunked_body_stops_at_the_cap_in_bounded_memory(server):
    cap = 2 * MiB
    policy = FetchPolicy(read_timeout=1.0, deadline=5.0, max_body_bytes=cap, max_decoded_bytes=cap)
    result, peak = traced_fetch(server, "/endless-chunked", policy=policy)
    assert result.error is FetchError.BODY_TOO_LARGE
    assert cap < result.size <= cap + 64 * KiB
    assert result.body is None
    assert peak < 3 * cap
    assert server.requests["/endless-chunked"] == 1


def _framing_only(chunk: bytes):
    """Chunked HTML whose bytes are nearly all framing: ``chunk`` repeated
    until 64 MiB have been sent or the client hangs up."""

    async def handler(request: Request, reader, writer, server) -> None:
        head = head_bytes(200, {"Content-Type": "text/html", "Transfer-Encoding": "chunked"})
        await send(writer, server, request.path, head)
        batch = chunk * max(1, 16 * KiB // len(chunk))
        while server.bytes_sent[request.path] < 64 * MiB:
            await send(writer, server, request.path, batch)

    return handler


@pytest.mark.parametrize(
    "chunk",
    [
        b"1;ext=" + b"e" * 4000 + b"\r\nx\r\n",  # one data byte per 4 KB chunk extension
        b"1\r\nx\r\n",  # six bytes on the wire for every byte of body
    ],
    ids=["chunk-extensions", "tiny-chunks"],
)
def test_chunk_framing_counts_against_the_wire_cap(server, chunk):
    cap = 64 * KiB
    server.route("/framing", _framing_only(chunk))
    policy = FetchPolicy(read_timeout=1.0, deadline=5.0, max_body_bytes=cap)
    result, took = timed_fetch(server, "/framing", policy=policy, keep_body=True)
    assert result.error is FetchError.BODY_TOO_LARGE
    # Cut within one socket read of the cap, though the body decoded so far
    # is a fraction of it; the server's writes stop at what socket buffers hold.
    assert cap < result.size <= cap + 64 * KiB
    assert len(result.body) < (cap + 64 * KiB) // 5  # counting only the body, it would reach the cap
    assert server.bytes_sent["/framing"] < 16 * MiB
    assert took < policy.deadline - 1  # cut by the cap, well before the deadline
    assert server.requests["/framing"] == 1


@pytest.mark.parametrize("coding", ["gzip", "deflate", "gzip, gzip"])
def test_a_compression_bomb_is_stopped_at_the_decoded_cap_in_bounded_memory(server, bombs, coding):
    cap = 2 * MiB
    server.route("/bomb", static(bombs[coding], headers={"Content-Encoding": coding}))
    policy = FetchPolicy(
        read_timeout=1.0, deadline=5.0, max_body_bytes=8 * MiB, max_decoded_bytes=cap
    )
    result, peak = traced_fetch(server, "/bomb", policy=policy)
    assert result.error is FetchError.DECOMPRESSION_LIMIT
    assert result.body is None
    assert peak < 3 * cap
    # The wire cap was never the limit: a few hundred KB of bomb did it.
    assert result.size < policy.max_body_bytes


def test_a_bomb_of_nul_bytes_served_as_html_stops_at_its_first_bytes(server):
    server.route("/zeros", static(_zeros_compressed(64 * MiB, 31), headers={"Content-Encoding": "gzip"}))
    result, peak = traced_fetch(server, "/zeros")
    assert result.binary and result.error is None and result.body is None
    assert result.size < 256 * 1024 and peak < MiB


def test_a_bomb_fetched_for_its_prefix_keeps_only_the_cap(server, bombs):
    server.route(
        "/bomb.txt",
        static(bombs["gzip"], headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"}),
    )
    cap = 2 * MiB
    result, peak = traced_fetch(server, "/bomb.txt", keep_body=True, max_bytes=cap)
    assert result.error is FetchError.DECOMPRESSION_LIMIT
    assert result.body == b" " * cap
    # The kept prefix (a bytearray over-allocates by up to an eighth), its one
    # copy into immutable bytes, and the fixed socket, parser and inflate
    # buffers: never a second copy of the expansion, never the 64 MiB bomb.
    assert peak < cap * 9 // 8 + cap + NETWORK_BUFFERS


@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip, br"])
def test_an_unrequested_encoding_is_reported_and_not_parsed(server, coding):
    result = fetch(server, f"/encoding?ce={coding}")
    assert result.error is None and result.status == 200
    assert result.body is None
    assert coding.split(", ")[-1] in result.error_detail


def test_too_many_stacked_encodings_are_not_decoded(server):
    server.route("/stacked", static(b"x", headers={"Content-Encoding": "gzip, gzip, gzip, gzip"}))
    result = fetch(server, "/stacked")
    assert result.body is None and "stacks 4" in result.error_detail


# -- redirects (rows 22, 23, 43) -------------------------------------------------------------------


@pytest.mark.parametrize(("path", "served"), [("/loop", 1), ("/ping", 2)])
def test_a_redirect_loop_is_detected_without_hammering(server, path, served):
    result = fetch(server, path)
    assert result.error is FetchError.REDIRECT_LOOP
    assert sum(server.requests.values()) == served <= 10
    assert len(result.redirects) == served


def test_an_endless_chain_of_new_urls_stops_at_max_redirects(server):
    result = fetch(server, "/chain?n=50")
    assert result.error is FetchError.TOO_MANY_REDIRECTS
    assert server.requests["/chain"] == POLICY.max_redirects + 1
    assert len(result.redirects) == POLICY.max_redirects + 1


@pytest.mark.parametrize(
    "location",
    [
        "file:///etc/passwd",
        "ftp://127.0.0.1/pub",
        "javascript:alert(1)",
        "data:text/html,<script>1</script>",
        "gopher://127.0.0.1:70/",
    ],
)
def test_a_redirect_to_another_scheme_is_refused_without_a_second_request(server, location):
    server.route("/away", redirect_to(location))
    result = fetch(server, "/away")
    assert result.error is FetchError.REDIRECT_BLOCKED_SCHEME
    assert sum(server.requests.values()) == 1 and server.connections == 1
    assert result.status == 302
    assert result.redirects[0].location == location


def test_a_redirect_to_a_refused_address_never_connects_there(server):
    with HostileServer() as admin:
        server.route("/to-admin", redirect_to(admin.url("/admin/")))
        result = fetch(server, "/to-admin")
        assert result.error is FetchError.SSRF_BLOCKED
        assert admin.connections == 0
    assert result.final_url == admin.url("/admin/")
    assert [hop.location for hop in result.redirects] == [admin.url("/admin/")]
    assert result.status is None  # the refused hop never answered; the hop list keeps the rest


@pytest.mark.parametrize(
    "location",
    [
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706433/",
        "http://internal.test/",
    ],
)
def test_each_redirect_hop_goes_through_the_guard(server, location):
    spy = SpyBackend()
    guard = AddressGuard(
        allowed_targets=[("127.0.0.1", server.port)],
        resolver=StubResolver({"internal.test": [["10.1.2.3"]]}),
    )
    server.route("/hop", redirect_to(location))

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps(), network_backend=spy) as fetcher:
            return await fetcher.fetch(server.url("/hop"))

    result = asyncio.run(run())
    assert result.error is FetchError.SSRF_BLOCKED
    assert spy.dialed == [("127.0.0.1", server.port)]


def test_a_slow_redirect_chain_is_bounded_by_the_total_budget(server):
    async def slow_hop(request: Request, reader, writer, server) -> None:
        await asyncio.sleep(0.4)
        step = int(request.query.get("i", "0")) + 1
        await respond(
            request, writer, server, status=302, headers={"Location": f"/slow-hop?i={step}"}
        )

    server.route("/slow-hop", slow_hop)
    policy = FetchPolicy(read_timeout=1.0, deadline=5.0, total_budget=1.0)
    result, took = timed_fetch(server, "/slow-hop", policy=policy)
    assert result.error is FetchError.DEADLINE_EXCEEDED
    assert took < policy.deadline - 1  # the 1 s budget across hops cut it, not a hop's 5 s deadline
    assert server.requests["/slow-hop"] <= 3


# -- malformed HTTP (rows 20, 26) ----------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/bad-status-line", "/http09", "/huge-header", "/many-headers", "/bad-chunk"]
)
def test_malformed_http_is_a_protocol_error_without_a_hang(server, path):
    result, _ = timed_fetch(server, path)
    assert result.error is FetchError.PROTOCOL_ERROR
    assert result.error_detail.startswith("Malformed HTTP response: ")
    assert "bytearray" not in result.error_detail
    assert result.body is None
    assert result.elapsed < POLICY.read_timeout  # no wait for more bytes
    assert server.requests[path] == 1  # a broken server is not asked again


def test_a_content_length_shorter_than_the_body_is_a_protocol_error(server):
    async def overlong(request: Request, reader, writer, server) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello, and more"
        )
        await writer.drain()

    server.route("/overlong", overlong)
    result = fetch(server, "/overlong")
    assert result.error is FetchError.PROTOCOL_ERROR and result.body is None
    assert result.error_detail == (
        "Malformed HTTP response: 10 more bytes arrived after the 5-byte body its Content-Length declared"
    )
    assert server.requests["/overlong"] == 1  # a lying server is not asked again


# -- headers sent twice, codings that are none, bytes after a gzip body ---------------------------


def raw_answer(headers: list[tuple[str, str]], body: bytes = b"", status: int = 200):
    """A handler answering with ``headers`` exactly as listed (repeats kept), then ``body``."""
    async def handler(request, reader, writer, server) -> bool:
        listed = [*headers, ("Content-Length", str(len(body))), ("Connection", "close")]
        await send(writer, server, request.path, head_bytes(status, listed) + body)
        return False
    return handler


def test_a_content_type_sent_twice_is_read_as_browsers_read_it_and_the_page_parsed(server):
    server.route("/twice", raw_answer([("Content-Type", "text/html"), ("Content-Type", "text/html; charset=utf-8")],
                                      OK_HTML))
    result = fetch(server, "/twice")
    assert result.error is None and result.is_html and result.body == OK_HTML


def test_a_location_sent_twice_is_followed_once_to_where_it_points(server):
    server.route("/moved", raw_answer([("Location", "/ok"), ("Location", "/ok")], status=302))
    result = fetch(server, "/moved")
    assert result.error is None and result.status == 200 and result.final_url == server.url("/ok")


@pytest.mark.parametrize("coding", ["utf-8", "none", "binary", "identity, 8bit"])
def test_a_content_encoding_that_names_no_compression_is_read_as_it_is(server, coding):
    server.route("/plain", static(OK_HTML, headers={"Content-Encoding": coding}))
    result = fetch(server, "/plain")
    assert result.error is None and result.body == OK_HTML


@pytest.mark.parametrize("after", [b"\r\n", b"trailing junk", b"\x00" * 8])
def test_bytes_after_a_whole_gzip_body_are_ignored_as_browsers_ignore_them(server, after):
    server.route("/gz", static(_gzip(OK_HTML) + after, headers={"Content-Encoding": "gzip"}))
    result = fetch(server, "/gz")
    assert result.error is None and result.body == OK_HTML


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=31)
    return packer.compress(data) + packer.flush()


def test_each_redirect_hop_keeps_how_long_its_own_answer_took(server):
    result = fetch(server, "/chain?n=1")
    assert result.status == 200 and len(result.redirects) == 2
    assert all(hop.ttfb is not None and 0 <= hop.ttfb < 2 for hop in result.redirects)


def test_an_error_pages_slow_body_leaves_its_status_the_answer(server):
    """A 404 whose HTML trickles past the deadline is a 404 (http_4xx), not a failed fetch: its body is never read."""
    async def slow_404(request, reader, writer, server) -> None:
        head = head_bytes(404, {"Content-Type": "text/html", "Content-Length": "100000"})
        await send(writer, server, request.path, head + b"<html>")
        await asyncio.sleep(5)

    server.route("/gone", slow_404)
    result, seconds = timed_fetch(server, "/gone")
    assert (result.status, result.error, result.body) == (404, None, None)
    assert seconds < 1.5


def test_redirects_whose_small_bodies_never_arrive_cost_seconds_not_the_fetchs_budget(monkeypatch):
    # Each hop declares a 100-byte body and sends none: waiting the request's deadline at every
    # hop would have spent the whole fetch budget on bytes nobody reads.
    monkeypatch.setattr(drain, "DRAIN_SECONDS", 0.5)
    policy = FetchPolicy(connect_timeout=1.0, read_timeout=10.0, deadline=10.0, total_budget=25.0)
    with HostileServer() as server:
        for n in range(3):
            async def stalled(request, reader, writer, srv, n=n):
                head = head_bytes(301, {"Location": f"/hop{n + 1}", "Content-Length": "100"})
                await send(writer, srv, request.path, head)
                await asyncio.sleep(30)

            server.route(f"/hop{n}", stalled)
        server.route("/hop3", static(OK_HTML))
        started = time.monotonic()
        result = fetch(server, "/hop0", policy=policy)
        elapsed = time.monotonic() - started
    assert (result.error, result.status, len(result.redirects)) == (None, 200, 3)
    assert elapsed < 5.0  # three short drains, not three 10 s deadlines

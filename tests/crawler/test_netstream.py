"""The asyncio network backend, against real loopback servers.

Each test starts a tiny asyncio server on 127.0.0.1 whose handler does one
thing (echo, stay silent, close, reset, never read) and checks the stream
reports it the way httpcore expects: data, b"" at a clean end, or the
httpcore exception the anyio backend would have raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable

import httpcore
import pytest
import trustme

from crawler.net import AddressGuard, GuardedBackend
from crawler.netstream import READ_HIGH_WATER, AsyncioBackend

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler, ssl_context: ssl.SSLContext | None = None):
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=ssl_context)
    return server, server.sockets[0].getsockname()[1]


@contextlib.asynccontextmanager
async def _connected(handler: Handler):
    """A stream dialled by the backend to a loopback server running ``handler``."""
    server, port = await _serve(handler)
    async with server:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=2)
        try:
            yield stream
        finally:
            await stream.aclose()


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # Holds the connection open, reading and answering nothing.
    await reader.read()
    writer.close()


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_read_returns_what_the_server_sent_and_respects_max_bytes():
    async def handler(reader, writer):
        writer.write(b"hello world")
        await writer.drain()
        await reader.read()
        writer.close()

    async def main():
        async with _connected(handler) as stream:
            first = await stream.read(5, timeout=2)
            rest = b""
            while len(rest) < 6:
                rest += await stream.read(100, timeout=2)
            return first, rest

    assert _run(main()) == (b"hello", b" world")


def test_read_returns_empty_bytes_when_the_server_closes_cleanly():
    async def handler(reader, writer):
        writer.write(b"bye")
        await writer.drain()
        writer.close()

    async def main():
        async with _connected(handler) as stream:
            received = b""
            for _ in range(10):
                chunk = await stream.read(100, timeout=2)
                if not chunk:
                    break
                received += chunk
            return received, chunk

    assert _run(main()) == (b"bye", b"")


def test_idle_connection_becomes_readable_once_the_server_closes_it():
    async def main():
        go = asyncio.Event()

        async def handler(reader, writer):
            await go.wait()
            writer.close()

        async with _connected(handler) as stream:
            await asyncio.sleep(0.05)
            before = stream.get_extra_info("is_readable")
            go.set()
            for _ in range(100):  # cap: up to one second for the FIN to arrive
                if stream.get_extra_info("is_readable"):
                    break
                await asyncio.sleep(0.01)
            after = stream.get_extra_info("is_readable")
            return before, after

    assert _run(main()) == (False, True)


def test_a_silent_server_raises_read_timeout():
    async def main():
        async with _connected(_silent) as stream:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(httpcore.ReadTimeout):
                await stream.read(100, timeout=0.2)
            waited = loop.time() - started
            return waited

    assert 0.15 < _run(main()) < 1.5


def test_a_reset_connection_raises_read_error():
    async def handler(reader, writer):
        raw = writer.get_extra_info("socket")
        # SO_LINGER with a zero timeout makes close() send RST, not FIN.
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def main():
        async with _connected(handler) as stream:
            with pytest.raises(httpcore.ReadError):
                for _ in range(10):
                    if not await stream.read(100, timeout=2):
                        break

    _run(main())


def test_writing_to_a_closed_connection_raises_write_error():
    async def handler(reader, writer):
        writer.close()

    async def main():
        async with _connected(handler) as stream:
            assert await stream.read(100, timeout=2) == b""
            with pytest.raises(httpcore.WriteError):
                await stream.write(b"GET / HTTP/1.1\r\n\r\n", timeout=2)

    _run(main())


def test_a_server_that_never_reads_raises_write_timeout():
    async def main():
        release, finished = asyncio.Event(), asyncio.Event()

        async def handler(reader, writer):
            await release.wait()
            writer.transport.abort()
            finished.set()

        server, port = await _serve(handler)
        async with server:
            stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=2)
            with pytest.raises(httpcore.WriteTimeout):
                for _ in range(20):  # cap: 320 MiB would overflow any socket buffer
                    await stream.write(b"x" * (16 * 1024 * 1024), timeout=0.2)
            await stream.aclose()
            release.set()
            await finished.wait()

    _run(main())


def test_a_large_body_arrives_whole_through_read_flow_control():
    body = bytes(range(256)) * (4 * READ_HIGH_WATER // 256)

    async def handler(reader, writer):
        writer.write(body)
        await writer.drain()
        writer.close()

    async def main():
        async with _connected(handler) as stream:
            await asyncio.sleep(0.1)  # let the queue pass the high-water mark first
            parts = []
            for _ in range(10_000):
                chunk = await stream.read(65536, timeout=2)
                if not chunk:
                    break
                assert len(chunk) <= 65536
                parts.append(chunk)
            return b"".join(parts)

    assert _run(main()) == body


def test_writes_arrive_whole_and_in_order_while_the_transport_holds_a_remainder():
    # A write larger than the socket takes leaves its rest with the transport;
    # later writes must queue behind that rest, not go out ahead of it through
    # the socket as the server drains it.
    big = bytes(range(256)) * (4 * 1024)  # 1 MiB
    pieces = [piece for n in range(12) for piece in (big if n % 2 else big[::-1], b"small %d" % n)]
    expected = b"".join(pieces)

    async def handler(reader, writer):
        data = await reader.readexactly(len(expected))
        writer.write(b"ok" if data == expected else b"garbled")
        await writer.drain()
        writer.close()

    async def main():
        async with _connected(handler) as stream:
            for piece in pieces:
                await stream.write(piece, timeout=5)
                await asyncio.sleep(0)  # let the loop flush part of what the transport holds
            return await stream.read(100, timeout=5)

    assert _run(main()) == b"ok"


def test_closing_plain_connections_leaves_no_descriptor_open():
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def main():
        server, port = await _serve(_silent)
        async with server:
            before = open_descriptors()
            streams = []  # kept referenced: only aclose may free what a stream holds
            for _ in range(20):
                stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=2)
                await stream.write(b"GET / HTTP/1.1\r\n\r\n", timeout=2)
                await stream.aclose()
                streams.append(stream)
            await asyncio.sleep(0.05)  # the loop closes aborted transports on its next turn
            return before, open_descriptors(), len(streams)

    before, after, kept = _run(main())
    assert kept == 20 and after <= before


def test_refused_connection_raises_connect_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound but not listening: connect is refused

        async def main():
            with pytest.raises(httpcore.ConnectError):
                await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=2)

        _run(main())


def test_addresses_are_reported_for_both_ends():
    async def main():
        server, port = await _serve(_silent)
        async with server:
            stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=2)
            info = (
                stream.get_extra_info("server_addr"),
                stream.get_extra_info("client_addr")[0],
                stream.get_extra_info("ssl_object"),
                stream.get_extra_info("socket") is not None,
            )
            await stream.aclose()
            return port, info

    port, info = _run(main())
    assert info == (("127.0.0.1", port), "127.0.0.1", None, True)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _server_context(ca: trustme.CA, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(context)
    return context


def _client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def test_tls_upgrade_verifies_the_host_name_and_carries_data(ca):
    async def handler(reader, writer):
        line = await reader.readline()
        writer.write(b"echo " + line)
        await writer.drain()
        writer.close()

    async def main():
        server, port = await _serve(handler, _server_context(ca, "site.test"))
        async with server:
            plain = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=2)
            stream = await plain.start_tls(_client_context(ca), "site.test", timeout=2)
            assert isinstance(stream.get_extra_info("ssl_object"), ssl.SSLObject)
            await stream.write(b"ping\n", timeout=2)
            received = b""
            for _ in range(10):
                chunk = await stream.read(100, timeout=2)
                if not chunk:
                    break
                received += chunk
            await stream.aclose()
            return received

    assert _run(main()) == b"echo ping\n"


def test_tls_to_the_wrong_host_name_raises_connect_error(ca):
    async def main():
        server, port = await _serve(_silent, _server_context(ca, "other.test"))
        async with server:
            plain = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=2)
            with pytest.raises(httpcore.ConnectError) as caught:
                await plain.start_tls(_client_context(ca), "site.test", timeout=2)
            return caught.value

    error = _run(main())
    assert isinstance(error.__cause__, ssl.SSLCertVerificationError)


def test_a_server_that_never_answers_the_handshake_raises_connect_timeout(ca):
    async def main():
        server, port = await _serve(_silent)  # plain TCP: the ClientHello goes unanswered
        async with server:
            plain = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=2)
            with pytest.raises(httpcore.ConnectTimeout):
                await plain.start_tls(_client_context(ca), "site.test", timeout=0.2)

    _run(main())


def test_guarded_backend_dials_through_the_asyncio_backend_by_default():
    backend = GuardedBackend(AddressGuard())
    assert isinstance(backend.inner, AsyncioBackend)


def test_backend_sleep_waits():
    async def main():
        loop = asyncio.get_running_loop()
        started = loop.time()
        await AsyncioBackend().sleep(0.05)
        return loop.time() - started

    assert _run(main()) >= 0.04

"""An asyncio-native httpcore network backend, cheaper per read than anyio's.

httpcore's default backend wraps every read and write in an anyio cancel
scope (which looks up the current task each time) and answers the pool's
"is this idle connection readable?" question by building anyio's attribute
dict, which calls ``getpeername``. Profiles put that machinery at a large
share of the crawl's fetch CPU. This backend talks to an ``asyncio.Protocol``
directly: data the event loop received waits in a queue, a read with data
already queued returns without suspending, a timeout is an entry on a timer
queue the backend's connections share (``crawler.timers``), and readability
is the protocol's own state (the loop has already seen any EOF or reset on
an idle socket).

Errors are raised as the httpcore exceptions the anyio backend raises;
``http11`` turns them into httpx's, and the fetcher names them from there.
The interface stays httpcore's, so tests can put a spy backend in its place.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore

from .timers import TimerQueue

# Above this many unread bytes the transport stops reading from the socket,
# so a fast server cannot grow the queue while the fetcher is busy.
READ_HIGH_WATER = 256 * 1024



# Distinct timeouts a backend keeps a TimerQueue for (the pool's read and write
# timeouts); reads with any other timeout get a loop timer each.
MAX_TIMER_QUEUES = 8


def _timer_queue(timers: dict[float, TimerQueue] | None, timeout: float) -> TimerQueue | None:
    if timers is None:
        return None
    queue = timers.get(timeout)
    if queue is None and len(timers) < MAX_TIMER_QUEUES:
        queue = timers[timeout] = TimerQueue(timeout)
    return queue


async def _wait(protocol, slot: str, timeout: float | None, timeout_error: type[Exception],
                timers: dict[float, TimerQueue] | None = None) -> None:
    """Park on a future the protocol resolves (data arrived, buffer drained, connection lost).

    The future sits in ``protocol.<slot>``; a timeout fails it with
    ``timeout_error``: a timer on the backend's queue for that timeout (see
    ``crawler.timers``), else one call_later timer, with no extra task as
    asyncio.wait_for would make.
    """
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    setattr(protocol, slot, waiter)
    queue = timer = None
    if timeout is not None:
        queue = _timer_queue(timers, timeout)
        if queue is not None:
            timer = queue.call_later(_expire, waiter, timeout_error)
        else:
            timer = loop.call_later(timeout, _expire, waiter, timeout_error)
    try:
        await waiter
    finally:
        if queue is not None:
            queue.cancel(timer)
        elif timer is not None:
            timer.cancel()
        if getattr(protocol, slot) is waiter:
            setattr(protocol, slot, None)

def _expire(waiter: asyncio.Future[None], error: type[Exception]) -> None:
    if not waiter.done():
        waiter.set_exception(error())


class _Protocol(asyncio.Protocol):
    """Queues received data and wakes the one reader or writer waiting on it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.eof = False
        self.lost = False
        self.error: BaseException | None = None
        self.read_paused = False
        self.write_paused = False
        self.read_waiter: asyncio.Future[None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > READ_HIGH_WATER and not self.read_paused and self.transport:
            self.read_paused = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> None:
        self.eof = True
        self._wake_reader()
        # Returning None lets the transport close itself: HTTP/1.1 never
        # writes after the server has finished sending.

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.eof = True
        self.error = exc
        self._wake_reader()
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_reader(self) -> None:
        waiter, self.read_waiter = self.read_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One TCP (or TLS-over-TCP) connection as httpcore wants to see it."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol, *, plain: bool = False,
                 timers: dict[float, TimerQueue] | None = None) -> None:
        self._transport = transport
        self._protocol = protocol
        # The backend's timer queues, shared by its connections (None: a loop timer per wait).
        self._timers = timers
        # A plain TCP connection's requests go out through a duplicate of its
        # socket: socket.send releases the interpreter lock around the system
        # call, the loop's transport.write does not, and on loopback a send
        # also runs the receiving side's TCP work. The audit's database thread
        # gets the lock meanwhile: py-spy --gil counted the crawl thread's
        # share of a 1,000-page audit at 761-877 samples against 958-1,006.
        # Only while the transport holds nothing unsent: what it holds must go
        # first, so then the transport takes the write as before.
        self._sock = None
        if plain:
            raw = transport.get_extra_info("socket")
            if raw is not None:
                try:
                    self._sock = raw.dup()
                    self._sock.setblocking(False)
                except OSError:
                    self._sock = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.chunks and not protocol.eof:
            await self._wait_readable(timeout)
        chunks = protocol.chunks
        if not chunks:
            if protocol.error is not None:
                raise httpcore.ReadError(str(protocol.error) or repr(protocol.error))
            return b""  # a clean end of stream, as the anyio backend reports it
        data = chunks.popleft()
        if len(data) > max_bytes:
            chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        protocol.buffered -= len(data)
        if protocol.read_paused and protocol.buffered <= READ_HIGH_WATER // 4:
            protocol.read_paused = False
            if not protocol.lost and protocol.transport is not None:
                protocol.transport.resume_reading()
        return data

    async def _wait_readable(self, timeout: float | None) -> None:
        await _wait(self._protocol, "read_waiter", timeout, httpcore.ReadTimeout, self._timers)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if protocol.lost or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        sock = self._sock
        if sock is not None and not protocol.write_paused and not self._transport.get_write_buffer_size():
            try:
                sent = sock.send(buffer)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise httpcore.WriteError(str(exc)) from exc
            if sent == len(buffer):
                return
            buffer = buffer[sent:]
        try:
            self._transport.write(buffer)
        except (OSError, RuntimeError) as exc:
            raise httpcore.WriteError(str(exc)) from exc
        if not protocol.write_paused:
            return
        await _wait(protocol, "drain_waiter", timeout, httpcore.WriteTimeout, self._timers)
        if protocol.lost:
            raise httpcore.WriteError(str(protocol.error or "the connection was closed"))

    async def aclose(self) -> None:
        # abort() rather than close(): nothing useful is left to flush when
        # the pool gives a connection up, and close() could wait on a peer
        # that stopped reading.
        self._close_sock()
        self._transport.abort()

    def _close_sock(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        self._close_sock()  # from here on, bytes go through TLS
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport,
                    self._protocol,
                    ssl_context,
                    server_hostname=server_hostname,
                )
        except TimeoutError:
            self._transport.abort()
            raise httpcore.ConnectTimeout("the TLS handshake timed out") from None
        except (OSError, ssl.SSLError, ConnectionError, RuntimeError) as exc:
            self._transport.abort()
            raise httpcore.ConnectError(str(exc) or repr(exc)) from exc
        except BaseException:
            self._transport.abort()
            raise
        if transport is None:
            # The peer closed during the handshake (start_tls returns None then).
            self._transport.abort()
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        # Flow control must now pause the TLS transport, not the raw one below it.
        self._protocol.transport = transport  # type: ignore[assignment]
        return AsyncioStream(transport, self._protocol, timers=self._timers)  # type: ignore[arg-type]

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # Idle HTTP/1.1 connections receive nothing unless the server
            # closed or reset them, which the event loop has already told the
            # protocol about.
            protocol = self._protocol
            return bool(protocol.chunks) or protocol.eof
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Dials TCP with the running asyncio loop; see the module docstring.

    Its connections share one TimerQueue per timeout value for their reads'
    and writes' timeouts: a fetcher's reads all use its read timeout.
    """

    def __init__(self) -> None:
        self._timers: dict[float, TimerQueue] = {}

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local_addr = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Protocol, host, port, local_addr=local_addr
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or repr(exc)) from exc
        try:
            # asyncio already sets TCP_NODELAY; these are the caller's extras.
            raw = transport.get_extra_info("socket")
            for option in socket_options or ():
                raw.setsockopt(*option)
        except OSError as exc:
            transport.abort()
            raise httpcore.ConnectError(str(exc)) from exc
        return AsyncioStream(transport, protocol, plain=True, timers=self._timers)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("Unix sockets are not supported by this backend")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


__all__ = ["READ_HIGH_WATER", "AsyncioBackend", "AsyncioStream"]

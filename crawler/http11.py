"""Keep-alive HTTP/1.1 for the fetcher: h11 over pooled netstream connections.

Why not httpcore's pool: for every request it takes anyio locks and shielded
cancel scopes (in the pool, the connection and the HTTP/1.1 state), asks
sniffio which async library is running, and scans its connections; httpx's
transport then copies the request and response into httpcore's models and
back. ``benchmarks/http_layers.py`` measures the CPU of a request against
nginx at 16 in flight through each layer: a HEAD costs about half as much
CPU through this pool as through httpcore's pools of four on the same sockets
(``benchmarks/RESULTS.md``, section (c)), and a whole ``Fetcher.check`` went
from about 0.7 ms to 0.2-0.4 ms, depending on the machine's load. An audit of the
benchmark corpus sends two requests a page at 10,000 pages and seven at
1,000 (every image, script and stylesheet is checked), so this is a good part
of what a page costs.

What stays as it was: h11, the parser httpcore uses, reads every response
with httpcore's 100 KB limit on a head; the sockets are ``netstream``'s,
dialled through the SSRF guard; and failures are raised as the httpx
exceptions httpx's own transport raises, so ``fetch._translate`` names them
as before.

The pool keeps one list of idle connections, oldest first, at most
``max_idle`` of them whatever the origins (a crawl checking links to
thousands of hosts must not hold thousands of sockets), and reuses the newest
one to the request's origin. A connection is dropped once it has been idle
for KEEPALIVE_EXPIRY, when the event loop saw the server close it, or when
the server sent more than the answer (a body with a HEAD answer is a common
misconfiguration, and the next request would read it as its own answer).

A request that fails on a reused connection before any byte of the answer
arrived is sent once more on a new connection: the server closed the idle connection as the request went out,
the keep-alive race RFC 9112 section 9.3.1 describes, and the fetcher only
sends GET and HEAD, which may be retried. The fetcher bounds how many requests
are in flight; the pool never waits for a connection.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable
from typing import NoReturn

import h11
import httpcore
import httpx

# One read from the socket: what httpcore reads at a time.
READ_SIZE = 64 * 1024
# A response head (status line and headers) larger than this is an attack or
# a broken server; httpcore's limit, so h11 reports it as it did there.
MAX_HEAD_BYTES = 100 * 1024
# Seconds an idle connection is kept for reuse (httpx's default is 5).
KEEPALIVE_EXPIRY = 5.0

Origin = tuple[bytes, bytes, int]

# The httpcore errors netstream and the SSRF guard's backend raise, as the
# httpx errors httpx's transport would turn them into. Looked up along the
# exception's MRO, so a subclass maps to its nearest listed base.
_HTTPX_ERRORS: dict[type[Exception], type[httpx.HTTPError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProtocolError: httpx.ProtocolError,
    h11.RemoteProtocolError: httpx.RemoteProtocolError,
    h11.LocalProtocolError: httpx.LocalProtocolError,
}


def _raise_as_httpx(exc: Exception) -> NoReturn:
    """Raise the httpx error ``exc`` stands for, chained to it; ``exc`` itself if
    it is no HTTP failure (the SSRF guard's refusal is a CrawlError already)."""
    for kind in type(exc).__mro__:
        mapped = _HTTPX_ERRORS.get(kind)
        if mapped is not None:
            raise mapped(str(exc)) from exc
    raise exc


class _Connection:
    """One socket and the h11 state of the exchange on it."""

    __slots__ = ("origin", "stream", "h11", "idle_since", "reused", "received", "lost")

    def __init__(self, origin: Origin, stream: httpcore.AsyncNetworkStream) -> None:
        self.origin = origin
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.idle_since = 0.0
        self.reused = False
        # Whether any byte of the current answer arrived: until one has, a
        # failure on a reused connection is the keep-alive race, not the site.
        self.received = False
        # Whether the last exchange failed because the connection went away.
        self.lost = False

    async def next_event(self, timeout: float | None):
        state = self.h11
        while True:
            event = state.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await self.stream.read(READ_SIZE, timeout)
            if data:
                self.received = True
            elif state.their_state is h11.SEND_RESPONSE:
                # httpcore's wording, which fetch._translate recognises.
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
            state.receive_data(data)

    def reusable(self) -> bool:
        """The exchange is complete and nothing beyond the answer arrived."""
        state = self.h11
        return state.our_state is h11.DONE and state.their_state is h11.DONE and not state.trailing_data[0]

    async def aclose(self) -> None:
        stream, self.stream = self.stream, None
        if stream is not None:
            await stream.aclose()


class Response:
    """Status and headers of one answer; iterate it for the raw body, then ``aclose()``.

    ``headers`` are h11's: ``(name, value)`` byte pairs, names lower-cased.
    Closing a response read to its end gives the connection back to the pool;
    closing it earlier closes the connection (the unread rest would have to be
    read before the next request could go).
    """

    __slots__ = ("status", "headers", "_connection", "_pool", "_timeout", "_done")

    def __init__(self, event: h11.Response, connection: _Connection, pool: Pool) -> None:
        self.status: int = event.status_code
        self.headers = event.headers
        self._connection: _Connection | None = connection
        self._pool = pool
        self._timeout = pool.read_timeout
        self._done = False

    def __aiter__(self) -> Response:
        return self

    async def __anext__(self) -> bytes:
        connection = self._connection
        if connection is None or self._done:
            raise StopAsyncIteration
        while True:
            try:
                event = await connection.next_event(self._timeout)
            except Exception as exc:
                _raise_as_httpx(exc)
            kind = type(event)
            if kind is h11.Data:
                return bytes(event.data)
            if kind is h11.EndOfMessage:
                self._done = True
                raise StopAsyncIteration

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._done and connection.reusable():
            await self._pool.release(connection)
        else:
            await connection.aclose()


class Pool:
    """Idle keep-alive connections, and the one call that uses them: ``send``."""

    def __init__(
        self,
        backend: httpcore.AsyncNetworkBackend,
        ssl_context: ssl.SSLContext,
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
        write_timeout: float | None,
        max_idle: int,
    ) -> None:
        self.backend = backend
        self.ssl_context = ssl_context
        # What httpcore sets on the context for an HTTP/1.1-only pool.
        ssl_context.set_alpn_protocols(["http/1.1"])
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.max_idle = max(1, max_idle)
        # Oldest first: each release appends, so the expired ones are at the front.
        self._idle: list[_Connection] = []
        self._closed = False

    async def send(
        self, method: bytes, url: httpx.URL, headers: Iterable[tuple[bytes, bytes]]
    ) -> Response:
        """Send a bodiless request and return once the response head is in.

        ``url`` must be absolute http(s) with no userinfo or fragment; the Host
        header is added here. Failures raise httpx errors (or the SSRF guard's
        ``CrawlError``, which passes through untouched).
        """
        scheme = url.raw_scheme
        origin: Origin = (scheme, url.raw_host, url.port or (443 if scheme == b"https" else 80))
        try:
            request = h11.Request(method=method, target=url.raw_path, headers=[(b"Host", url.netloc), *headers])
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc
        connection = await self._checkout(origin)
        try:
            return await self._send_on(connection, request)
        except (httpx.NetworkError, httpx.RemoteProtocolError):
            if not connection.reused or connection.received or not connection.lost:
                raise
        # The keep-alive race: the same request once more, on a new connection.
        return await self._send_on(await self._connect(origin), request)

    async def _send_on(self, connection: _Connection, request: h11.Request) -> Response:
        try:
            return Response(await self._exchange(connection, request), connection, self)
        except BaseException as exc:
            connection.lost = _lost_connection(exc)
            await connection.aclose()
            if not isinstance(exc, Exception):
                raise  # a cancellation
            _raise_as_httpx(exc)

    async def _exchange(self, connection: _Connection, request: h11.Request) -> h11.Response:
        state = connection.h11
        data = state.send(request) + state.send(h11.EndOfMessage())
        try:
            await connection.stream.write(data, self.write_timeout)
        except httpcore.WriteError:
            # The server may have answered and closed before reading it all
            # (a 413, say): read what it said, as httpcore does.
            pass
        while True:
            event = await connection.next_event(self.read_timeout)
            if type(event) is h11.Response:
                return event
            # 1xx answers (100 Continue, 103 Early Hints) come before the real one.

    async def _checkout(self, origin: Origin) -> _Connection:
        """The newest idle connection to ``origin`` that is still good, or a new one."""
        # The list is only changed between awaits, so no other task sees it half done.
        stale = self._take_expired()
        idle, found = self._idle, None
        for index in range(len(idle) - 1, -1, -1):
            connection = idle[index]
            if connection.origin != origin:
                continue
            del idle[index]
            if connection.stream.get_extra_info("is_readable"):
                # An idle HTTP/1.1 connection receives nothing unless the
                # server closed or reset it.
                stale.append(connection)
                continue
            found = connection
            break
        for dropped in stale:
            await dropped.aclose()
        if found is None:
            return await self._connect(origin)
        found.reused = True
        found.received = False
        return found

    def _take_expired(self) -> list[_Connection]:
        """Remove and return the idle connections past KEEPALIVE_EXPIRY (the oldest come first)."""
        idle = self._idle
        oldest_kept = time.monotonic() - KEEPALIVE_EXPIRY
        count = 0
        while count < len(idle) and idle[count].idle_since < oldest_kept:
            count += 1
        expired = idle[:count]
        del idle[:count]
        return expired

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        try:
            stream = await self.backend.connect_tcp(host.decode("ascii"), port, timeout=self.connect_timeout)
            if scheme == b"https":
                stream = await stream.start_tls(
                    self.ssl_context, server_hostname=host.decode("ascii"), timeout=self.connect_timeout
                )
        except Exception as exc:
            _raise_as_httpx(exc)
        return _Connection(origin, stream)

    async def release(self, connection: _Connection) -> None:
        """Keep a connection whose exchange is complete for the next request to its origin."""
        if self._closed:
            await connection.aclose()  # the pool closed while this answer was being read
            return
        connection.h11.start_next_cycle()
        connection.idle_since = time.monotonic()
        idle = self._idle
        idle.append(connection)
        stale = self._take_expired()
        if len(idle) > self.max_idle:
            stale += idle[: len(idle) - self.max_idle]
            del idle[: len(idle) - self.max_idle]
        for dropped in stale:
            await dropped.aclose()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()


def _lost_connection(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection went away (not a timeout, not a bad answer)."""
    if isinstance(exc, (httpcore.ReadError, httpcore.WriteError)):
        return True
    return isinstance(exc, httpx.RemoteProtocolError) and "without sending a response" in str(exc)

"""Keep-alive HTTP/1.1 for the fetcher: a small client codec over pooled netstream connections.

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

Why not h11 (the parser httpcore uses, and this pool's until December
2026): per exchange it builds and validates event objects and runs a state
machine for both sides, about 0.2 ms of CPU per request, most of what a HEAD
cost here, and the audit of a small site sends seven requests a page. The
codec below does what a client that only sends bodiless GET and HEAD needs:
it writes the request in one piece, finds the end of the response head with
two fixed-string searches, parses the status line with an anchored regex and
the fields by splitting each line at its colon, and
frames the body by RFC 9112 section 6.3 (no body for HEAD, 1xx, 204 and 304;
chunked; Content-Length; else to the close). What h11 refused, it refuses,
as httpx's RemoteProtocolError: a malformed status line or field, a head
(or chunk line) over 100 KB, conflicting Content-Lengths, a transfer coding
other than chunked, a bad chunk, a body cut short.
``benchmarks/http_layers.py`` measures the pool's CPU per request.

The sockets are ``netstream``'s, dialled through the SSRF guard, and
failures are raised as the httpx exceptions httpx's own transport raises, so
``fetch._translate`` names them as before.

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

import re
import ssl
import time
from collections.abc import Callable, Iterable
from typing import NoReturn

import httpcore
import httpx

from .wire_url import WireURL

# One read from the socket: what httpcore reads at a time.
READ_SIZE = 64 * 1024
# A response head (status line and headers), or a chunk's size line or
# trailer, larger than this is an attack or a broken server (httpcore's limit).
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
}


def _raise_as_httpx(exc: Exception) -> NoReturn:
    """Raise the httpx error ``exc`` stands for, chained to it; ``exc`` itself if
    it is no HTTP failure (the SSRF guard's refusal is a CrawlError already)."""
    for kind in type(exc).__mro__:
        mapped = _HTTPX_ERRORS.get(kind)
        if mapped is not None:
            raise mapped(str(exc)) from exc
    raise exc


# The response grammar of RFC 9112, as h11 read it: field values and reason
# phrases may hold any byte but NUL, CR, LF, VT and FF (h11's field-vchar is
# [^\x00\s]). A line may end in CRLF or a bare LF (section 2.2 lets a
# recipient accept that); the head is cut at its blank line before these run,
# so they see one line each. No pattern here can backtrack: a field line is
# split at its first colon and its value stripped in Python (_fields), as an ambiguous
# pattern (optional spaces around a lazy value) took seconds to minutes on a
# long run of spaces a hostile server can send.
_STATUS_LINE = re.compile(rb"HTTP/(\d)\.(\d) (\d{3})(?: [^\x00\n\r\x0b\x0c]*)?")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;.*)?")
_DIGITS = re.compile(rb"[0-9]{1,18}")


def _byte_class(members: bytes) -> bytes:
    """A ``bytes.translate`` table sending ``members`` to 1 and every other byte to 0:
    ``0 not in data.translate(table)`` says every byte of ``data`` is a member,
    in two C loops with nothing to set up (an int: ``bytes in bytes`` first
    tries the bytes as an int and formats a TypeError, several times the cost
    of the search). Each request and response went
    through about twenty regex matches here (field lines, names and values,
    the search for the blank line): a fifth of the instructions of a HEAD
    check (callgrind over ``benchmarks/http_layers.py``)."""
    return bytes(1 if byte in members else 0 for byte in range(256))


# Token characters (RFC 9110 section 5.6.2): field names and methods.
_TOKEN = _byte_class(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# Visible ASCII: a request target (no space or control byte).
_VISIBLE = _byte_class(bytes(range(0x21, 0x7F)))
# What a field value we write may hold: no control byte but tab.
_VALUE = _byte_class(b"\t" + bytes(range(0x20, 0x7F)) + bytes(range(0x80, 0x100)))
# Bytes no received field line may hold but CR (looked for on its own: every
# line ends in one, cut off first), as ints (see _byte_class): NUL, VT, FF. A
# reason phrase may hold none of the four (_STATUS_LINE).
_RARE_IN_FIELDS = (0x00, 0x0B, 0x0C)

# Informational (1xx) answers taken before the real one: a server sending
# them without end is stuck or hostile.
MAX_INFORMATIONAL = 10

# How a response's body is framed (RFC 9112 section 6.3).
_NONE, _LENGTH, _CHUNKED, _TO_CLOSE = range(4)


def _malformed(message: str) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError(message)


def _shown(line: bytes | bytearray) -> str:
    """A received line, quoted short for an error message."""
    return repr(bytes(line[:80]))


class _Connection:
    """One socket, the bytes received on it and not yet used, and the state of the exchange on it."""

    __slots__ = ("origin", "stream", "buffer", "eof", "keep_alive", "complete", "idle_since", "reused",
                 "received", "lost")

    def __init__(self, origin: Origin, stream: httpcore.AsyncNetworkStream) -> None:
        self.origin = origin
        self.stream = stream
        self.buffer = bytearray()
        self.eof = False
        # Whether the server lets the connection carry another exchange after this one.
        self.keep_alive = False
        # Whether the current answer has been read to its end.
        self.complete = False
        self.idle_since = 0.0
        self.reused = False
        # Whether any byte of the current answer arrived: until one has, a
        # failure on a reused connection is the keep-alive race, not the site.
        self.received = False
        # Whether the last exchange failed because the connection went away.
        self.lost = False

    async def read(self, timeout: float | None) -> bytes:
        """The next bytes from the socket (not the buffer); b"" at the end of the stream."""
        if self.eof:
            return b""
        data = await self.stream.read(READ_SIZE, timeout)
        if data:
            self.received = True
        else:
            self.eof = True
        return data

    async def fill(self, timeout: float | None) -> bool:
        """Read more into the buffer; False at the end of the stream."""
        data = await self.read(timeout)
        self.buffer += data
        return bool(data)

    async def line(self, timeout: float | None, what: str) -> bytes:
        """One line (without its line ending) of a chunked body: a size line or a trailer."""
        buffer, scanned = self.buffer, 0
        while (end := buffer.find(b"\n", scanned)) < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise _malformed("a chunk size line or trailer is longer than 100 KB")
            scanned = len(buffer)
            if not await self.fill(timeout):
                raise _malformed(f"peer closed connection without sending complete message body: {what}")
        if end > MAX_HEAD_BYTES:
            raise _malformed("a chunk size line or trailer is longer than 100 KB")
        line = bytes(buffer[:end])
        del buffer[:end + 1]
        return line[:-1] if line.endswith(b"\r") else line

    async def head(self, timeout: float | None) -> tuple[bytes, bytes]:
        """The next response head: its status line and the block of its fields."""
        buffer, scanned = self.buffer, 0
        while True:
            if buffer[:1] and buffer[:1] != b"H":
                # Not HTTP at all (a TLS alert from an HTTPS port, say): no need to
                # wait for a blank line that may never come.
                raise _malformed(f"illegal status line: {_shown(buffer[:80])}")
            found = _blank_line(buffer, scanned)
            if found is not None:
                break
            if len(buffer) > MAX_HEAD_BYTES:
                raise _malformed("Receive buffer too long")
            scanned = max(0, len(buffer) - 3)  # a blank line may straddle two reads
            if not await self.fill(timeout):
                # httpcore's wording, which fetch._translate recognises.
                raise _malformed("Server disconnected without sending a response.")
        end, body_start = found
        if end > MAX_HEAD_BYTES:
            raise _malformed("Receive buffer too long")
        head = bytes(buffer[:end])
        del buffer[:body_start]
        status, _, fields = head.partition(b"\n")
        return (status[:-1] if status.endswith(b"\r") else status), fields

    def reusable(self) -> bool:
        """The exchange is complete and nothing beyond the answer arrived."""
        return self.complete and self.keep_alive and not self.eof and not self.buffer

    def reset(self) -> None:
        """Ready for the next exchange."""
        self.complete = False
        self.keep_alive = False

    async def aclose(self) -> None:
        stream, self.stream = self.stream, None
        if stream is not None:
            await stream.aclose()


def _blank_line(buffer: bytearray, start: int) -> tuple[int, int] | None:
    """Where the blank line ending a response head is, searching from ``start``:
    (the end of the head's last line, the start of what follows), or None.

    What the pattern ``\\r?\\n\\r?\\n`` finds, but with two searches for a
    fixed string (memchr-fast) instead of a pattern tried at every byte: the
    earliest line feed followed by an empty line, its carriage return included.
    """
    crlf = buffer.find(b"\n\r\n", start)
    lf = buffer.find(b"\n\n", start)
    if lf >= 0 and (crlf < 0 or lf < crlf):
        at, after = lf, lf + 2
    elif crlf >= 0:
        at, after = crlf, crlf + 3
    else:
        return None
    if at > start and buffer[at - 1] == 0x0D:
        at -= 1
    return at, after


def _fields(block: bytes) -> list[tuple[bytes, bytes]]:
    """``(name, value)`` pairs of a head's field block, names lower-cased."""
    fields: list[tuple[bytes, bytes]] = []
    if not block:
        return fields
    folded: dict[int, list[bytes]] = {}  # field index -> its value's pieces, joined once
    # What most heads are (every line ending CRLF, no other CR, no NUL, VT or
    # FF, no folded line) is told from the whole block, so most lines need no
    # test of their own for them.
    newlines = block.count(b"\n")
    plain_endings = block.count(b"\r\n") == newlines == block.count(b"\r")
    if plain_endings:
        lines = block.split(b"\r\n")
    else:
        lines = [line[:-1] if line.endswith(b"\r") else line for line in block.split(b"\n")]
    odd = 0x00 in block or 0x0B in block or 0x0C in block  # _RARE_IN_FIELDS
    folding = block[:1] in (b" ", b"\t") or block.find(b"\n ") >= 0 or block.find(b"\n\t") >= 0
    for line in lines:
        if (not plain_endings and 0x0D in line) or (odd and any(byte in line for byte in _RARE_IN_FIELDS)):
            raise _malformed(f"illegal header line: {_shown(line)}")
        if folding and line[:1] in (b" ", b"\t"):
            # Obsolete line folding (RFC 9112 section 5.2): part of the previous value.
            if not fields:
                raise _malformed(f"illegal header line: {_shown(line)}")
            index = len(fields) - 1
            folded.setdefault(index, [fields[index][1]]).append(line.strip(b" \t"))
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or 0 in name.translate(_TOKEN):
            raise _malformed(f"illegal header line: {_shown(line)}")
        fields.append((name.lower(), value.strip(b" \t")))
    for index, pieces in folded.items():
        fields[index] = (fields[index][0], b" ".join(piece for piece in pieces if piece))
    return fields


def _framing(method: bytes, status: int, fields: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """How the body after this head is delimited, and its length when declared."""
    if method == b"HEAD" or status in (204, 304):
        return _NONE, 0
    codings = [c.strip().lower() for name, value in fields if name == b"transfer-encoding"
               for c in value.split(b",")]
    if codings:
        # Transfer-Encoding wins over Content-Length (section 6.3); chunked is
        # the only coding a server may use without being asked (section 6.1).
        if codings != [b"chunked"]:
            raise _malformed("unsupported Transfer-Encoding")
        return _CHUNKED, 0
    lengths = {v.strip() for name, value in fields if name == b"content-length" for v in value.split(b",")}
    if lengths:
        (length,) = lengths if len(lengths) == 1 else (b"",)
        if _DIGITS.fullmatch(length) is None:
            raise _malformed("bad Content-Length")
        return _LENGTH, int(length)
    return _TO_CLOSE, 0


class Response:
    """Status and headers of one answer; iterate it for the raw body, then ``aclose()``.

    ``headers`` are ``(name, value)`` byte pairs in the order received, names
    lower-cased. Closing a response read to its end gives the connection back
    to the pool; closing it earlier closes the connection (the unread rest
    would have to be read before the next request could go).
    """

    __slots__ = ("status", "headers", "_connection", "_pool", "_timeout", "_framing", "_left", "_done")

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], framing: tuple[int, int],
                 connection: _Connection, pool: Pool) -> None:
        self.status = status
        self.headers = headers
        self._connection: _Connection | None = connection
        self._pool = pool
        self._timeout = pool.read_timeout
        self._framing, self._left = framing
        self._done = self._framing == _NONE
        connection.complete = self._done

    @property
    def done(self) -> bool:
        """Whether the body has been read to its end, or there is none (HEAD, 204, 304)."""
        return self._done

    def __aiter__(self) -> Response:
        return self

    async def __anext__(self) -> bytes:
        connection = self._connection
        if connection is None or self._done:
            raise StopAsyncIteration
        try:
            chunk = await self._next(connection)
        except Exception as exc:
            _raise_as_httpx(exc)
        if not chunk:
            self._done = connection.complete = True
            raise StopAsyncIteration
        return chunk

    async def _next(self, connection: _Connection) -> bytes:
        """The next piece of the body, or b"" at its end."""
        framing, buffer = self._framing, connection.buffer
        if framing == _CHUNKED:
            if self._left == 0:
                size = await self._chunk_size(connection)
                if size == 0:
                    await self._trailer(connection)
                    return b""
                self._left = size
            piece = await self._take(connection, "incomplete chunked read")
            if self._left == 0:  # the chunk's data ends with a line ending of its own
                if await connection.line(self._timeout, "incomplete chunked read"):
                    raise _malformed("missing line ending after a chunk")
            return piece
        if framing == _LENGTH:
            if self._left == 0:
                return b""
            return await self._take(connection, f"{self._left} more bytes were expected")
        # To the close: HTTP/1.0's framing, and a server's that declares none.
        if not buffer:
            return await connection.read(self._timeout)
        piece = bytes(buffer)
        buffer.clear()
        return piece

    async def _take(self, connection: _Connection, missing: str) -> bytes:
        """Up to the rest of a declared length (of a body or a chunk)."""
        buffer = connection.buffer
        if not buffer:
            # Most of a body comes straight from the socket, with no copy.
            data = await connection.read(self._timeout)
            if not data:
                raise _malformed(f"peer closed connection without sending complete message body: {missing}")
            if len(data) <= self._left:
                self._left -= len(data)
                return data
            buffer += data
        count = min(self._left, len(buffer))
        if count == len(buffer):
            piece = bytes(buffer)
            buffer.clear()
        else:
            piece = bytes(buffer[:count])
            del buffer[:count]
        self._left -= count
        return piece

    async def _chunk_size(self, connection: _Connection) -> int:
        line = await connection.line(self._timeout, "incomplete chunked read")
        match = _CHUNK_SIZE.fullmatch(line)
        if match is None:
            raise _malformed(f"illegal chunk header: {_shown(line)}")
        return int(match[1], 16)

    async def _trailer(self, connection: _Connection) -> None:
        """Skip the trailer fields after the last chunk, up to the blank line (capped)."""
        total = 0
        while line := await connection.line(self._timeout, "incomplete chunked trailer"):
            total += len(line)
            if total > MAX_HEAD_BYTES:
                raise _malformed("Receive buffer too long")

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
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
        write_timeout: float | None,
        max_idle: int,
    ) -> None:
        self.backend = backend
        # A context, or what makes one at the first https connection: loading
        # the CA bundle took 15-25 ms, on the start of every audit, most of
        # which never leave plain http.
        self._ssl_context = ssl_context
        if isinstance(ssl_context, ssl.SSLContext):
            ssl_context.set_alpn_protocols(["http/1.1"])
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.max_idle = max(1, max_idle)
        # Oldest first: each release appends, so the expired ones are at the front.
        self._idle: list[_Connection] = []
        self._closed = False

    @property
    def ssl_context(self) -> ssl.SSLContext:
        context = self._ssl_context
        if not isinstance(context, ssl.SSLContext):
            context = self._ssl_context = context()
            # What httpcore sets on the context for an HTTP/1.1-only pool.
            context.set_alpn_protocols(["http/1.1"])
        return context

    async def send(
        self, method: bytes, url: httpx.URL | WireURL, headers: Iterable[tuple[bytes, bytes]]
    ) -> Response:
        """Send a bodiless request and return once the response head is in.

        ``url`` must be absolute http(s) with no userinfo or fragment; the Host
        header is added here. Failures raise httpx errors (or the SSRF guard's
        ``CrawlError``, which passes through untouched).
        """
        scheme = url.raw_scheme
        origin: Origin = (scheme, url.raw_host, url.port or (443 if scheme == b"https" else 80))
        request = _request(method, url.raw_path, [(b"Host", url.netloc), *headers])
        connection = await self._checkout(origin)
        try:
            return await self._send_on(connection, method, request)
        except (httpx.NetworkError, httpx.RemoteProtocolError):
            if not connection.reused or connection.received or not connection.lost:
                raise
        # The keep-alive race: the same request once more, on a new connection.
        return await self._send_on(await self._connect(origin), method, request)

    async def _send_on(self, connection: _Connection, method: bytes, request: bytes) -> Response:
        try:
            return await self._exchange(connection, method, request)
        except BaseException as exc:
            connection.lost = _lost_connection(exc)
            await connection.aclose()
            if not isinstance(exc, Exception):
                raise  # a cancellation
            _raise_as_httpx(exc)

    async def _exchange(self, connection: _Connection, method: bytes, request: bytes) -> Response:
        try:
            await connection.stream.write(request, self.write_timeout)
        except httpcore.WriteError:
            # The server may have answered and closed before reading it all
            # (a 413, say): read what it said, as httpcore does.
            pass
        for _ in range(MAX_INFORMATIONAL + 1):
            status_line, block = await connection.head(self.read_timeout)
            match = _STATUS_LINE.fullmatch(status_line)
            if match is None:
                raise _malformed(f"illegal status line: {_shown(status_line)}")
            status = int(match[3])
            if status < 100:
                raise _malformed(f"illegal status code {status}")
            fields = _fields(block)
            if status >= 200:
                break
            if status == 101:
                raise _malformed("the server switched protocols, which was not asked for")
            # 1xx answers (100 Continue, 103 Early Hints) come before the real one.
        else:
            raise _malformed(f"more than {MAX_INFORMATIONAL} informational answers before the response")
        framing = _framing(method, status, fields)
        tokens = {t.strip().lower() for name, value in fields if name == b"connection" for t in value.split(b",")}
        # HTTP/1.0 closes unless it says keep-alive; 1.1 keeps alive unless it says close.
        if (match[1], match[2]) == (b"1", b"1"):
            keep = b"close" not in tokens
        else:
            keep = b"keep-alive" in tokens and b"close" not in tokens and framing[0] != _CHUNKED
        connection.keep_alive = keep and framing[0] != _TO_CLOSE
        return Response(status, fields, framing, connection, self)

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
        connection.reset()
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


def _request(method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A bodiless HTTP/1.1 request, refusing what would break its framing (a
    line ending smuggled into a field, say) as h11 did: LocalProtocolError."""
    if not method or 0 in method.translate(_TOKEN) or not target or 0 in target.translate(_VISIBLE):
        raise httpx.LocalProtocolError(f"Illegal request line: {method!r} {target[:80]!r}")
    parts = [method, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if not name or 0 in name.translate(_TOKEN) or 0 in value.translate(_VALUE):
            raise httpx.LocalProtocolError(f"Illegal header: {bytes(name)[:80]!r}")
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)


def _lost_connection(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection went away (not a timeout, not a bad answer)."""
    if isinstance(exc, (httpcore.ReadError, httpcore.WriteError)):
        return True
    return isinstance(exc, httpx.RemoteProtocolError) and "without sending a response" in str(exc)

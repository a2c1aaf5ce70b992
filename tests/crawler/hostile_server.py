"""A loopback HTTP server with one path per hostile behaviour, for crawler tests.

It speaks raw HTTP/1.1 over asyncio streams (so it can lie, drip, reset and
send malformed responses no well-behaved framework would), runs its event loop
in a background thread (so both sync tests and ``asyncio.run`` clients can use
it), binds ``127.0.0.1`` on an ephemeral port, and counts what it saw:
``connections`` accepted, how many are ``open`` now, ``requests`` per path,
every ``seen`` request with its headers, and ``bytes_sent`` per path. Every
response closes the connection unless a handler returns True (see
``respond(keep_alive=True)``), so one request is normally one connection and
"no request was made" is easy to assert.

Usage::

    with HostileServer() as server:
        server.route("/bomb", static(bomb, headers={"Content-Encoding": "gzip"}))
        url = server.url("/drip?interval=0.5")

Also here, for SSRF tests that must never open a socket to a refused range:
``StubResolver`` (scripted DNS answers, per call) and ``SpyBackend`` (an
httpcore network backend that records every dial and only ever dials
127.0.0.0/8).

``Throttle`` (429 with a Retry-After once a few requests came, for a while)
and ``Arrivals`` (when each request came) are handlers to route any path to.

Built-in paths (query parameters in brackets):

    /ok                      200 small HTML page
    /drip [interval, size]   headers, then one body byte every ``interval`` s
    /hang                    reads the request, never answers
    /reset [declared, send]  sends ``send`` of ``declared`` body bytes, then RST
    /short [declared, send]  same, but a clean close (FIN)
    /declared-huge           Content-Length: 2147483648, then a trickle
    /endless-chunked         chunked HTML that never ends
    /chunk-extensions [ext]  chunked HTML of 1-byte chunks, each behind a chunk
                             extension of ``ext`` bytes (90 000), never ending
    /redirect [to, status]   3xx to ``to`` (any string, unvalidated)
    /loop                    302 to itself
    /ping, /pong             302 to each other
    /chain [n]               n redirects, then /ok
    /status [code, retry_after, retry_in]   any status, Retry-After as seconds
                             or (retry_in) as an HTTP-date that many s ahead
    /flaky [fail, code]      ``code`` for the first ``fail`` requests, then 200
    /type [ct, size]         200 with that Content-Type and a body of ``size``
    /encoding [ce]           HTML claiming Content-Encoding ``ce`` (junk bytes)
    /bad-status-line, /http09, /huge-header, /many-headers, /bad-chunk
                             malformed responses
    /keep-alive              200 small HTML page, connection kept open
    /keep-alive-redirect     302 to /keep-alive, connection kept open
    /head-poison [size, chunked, delay]
                             keep-alive; HEAD is answered with Content-Length:
                             ``size`` (or chunked) and then that many bytes of a
                             second, fake response (``POISON_HTML``), at once or
                             ``delay`` s later; GET as /keep-alive
    anything else            404
"""

from __future__ import annotations

import asyncio
import email.utils
import socket
import ssl
import struct
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

import httpcore

OK_HTML = b"<!doctype html><html><head><title>ok</title></head><body><p>ok</p></body></html>"
POISON_HTML = b"<!doctype html><html><head><title>poison</title></head><body>poison</body></html>"

# Bounds for the endless behaviours, so a broken client cannot make a test
# server run for ever either.
MAX_DRIP_BYTES = 10_000
MAX_ENDLESS_BYTES = 1024 * 1024 * 1024
MAX_REQUEST_HEAD = 64 * 1024
MAX_REQUESTS_PER_CONNECTION = 1000


class Sleeps:
    """An injected ``sleep`` for the Fetcher that records the delays and returns at once."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names


# Returns True to keep the connection open for another request.
Handler = Callable[
    [Request, asyncio.StreamReader, asyncio.StreamWriter, "HostileServer"],
    Awaitable[bool | None],
]


class HostileServer:
    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.ssl_context = ssl_context
        self.connections = 0
        self.open = 0  # connections accepted and not yet closed by either side
        self.requests: Counter[str] = Counter()
        self.bytes_sent: Counter[str] = Counter()
        self.seen: list[Request] = []
        self.routes: dict[str, Handler] = dict(BUILTIN_ROUTES)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> HostileServer:
        # Pinned to the standard loop: the server is the constant while tests
        # vary the client's loop (tests/crawler/test_loop.py runs it on uvloop).
        loop = asyncio.SelectorEventLoop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(
                        self._serve, "127.0.0.1", 0, ssl=self.ssl_context, limit=MAX_REQUEST_HEAD
                    )
                )
            except BaseException as exc:  # surfaced to the starting thread
                failure.append(exc)
                ready.set()
                return
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="hostile-server", daemon=True)
        self._thread.start()
        ready.wait(5)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        future.result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop = None

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- helpers for tests ---------------------------------------------------

    @property
    def origin(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.origin + path

    def route(self, path: str, handler: Handler) -> None:
        self.routes[path] = handler

    def headers_of(self, path: str) -> list[dict[str, str]]:
        return [request.headers for request in self.seen if request.path == path]

    # -- serving -----------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        self.open += 1
        try:
            # A handler returning True keeps the connection open for the next
            # request (keep-alive); every built-in behaviour closes instead.
            for _ in range(MAX_REQUESTS_PER_CONNECTION):
                request = await _read_request(reader)
                if request is None:
                    return
                self.requests[request.path] += 1
                self.seen.append(request)
                handler = self.routes.get(request.path, not_found)
                if not await handler(request, reader, writer, self):
                    return
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ssl.SSLError,
        ):
            pass  # the client hung up or spoke nonsense; either is its right
        except asyncio.CancelledError:
            pass
        finally:
            self.open -= 1
            self._tasks.discard(task)
            if not writer.transport.is_closing():
                writer.transport.close()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = (lines[0].split(" ") + ["", "", ""])[:3]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    parts = urlsplit(target)
    return Request(method, target, parts.path, dict(parse_qsl(parts.query)), headers)


# -- response helpers (usable by custom handlers) ------------------------------


def head_bytes(
    status: int, headers: dict[str, str] | list[tuple[str, str]], reason: str = "X"
) -> bytes:
    items = headers.items() if isinstance(headers, dict) else headers
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in items]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def send(writer: asyncio.StreamWriter, server: HostileServer, path: str, data: bytes) -> None:
    writer.write(data)
    server.bytes_sent[path] += len(data)
    await writer.drain()


async def respond(
    request: Request,
    writer: asyncio.StreamWriter,
    server: HostileServer,
    *,
    status: int = 200,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    keep_alive: bool = False,
) -> bool:
    """A well-formed response (no body for HEAD); returns ``keep_alive`` for the handler."""
    data = response_bytes(status=status, body=body, headers=headers, keep_alive=keep_alive,
                          head_only=request.method == "HEAD")
    await send(writer, server, request.path, data)
    return keep_alive


def response_bytes(*, status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None,
                   keep_alive: bool = False, head_only: bool = False) -> bytes:
    """The bytes ``respond`` sends, for a handler that writes them together with something else."""
    all_headers = {"Content-Type": "text/html; charset=utf-8", "Content-Length": str(len(body))}
    all_headers.update(headers or {})
    all_headers["Connection"] = "keep-alive" if keep_alive else "close"
    return head_bytes(status, all_headers) + (b"" if head_only else body)


def static(
    body: bytes,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    keep_alive: bool = False,
) -> Handler:
    """A handler always answering ``body`` with ``headers`` (e.g. a prebuilt bomb)."""

    async def handler(request, reader, writer, server) -> bool:
        return await respond(
            request,
            writer,
            server,
            status=status,
            body=body,
            headers=headers,
            keep_alive=keep_alive,
        )

    return handler


def redirect_to(location: str, status: int = 302, *, keep_alive: bool = False) -> Handler:
    async def handler(request, reader, writer, server) -> bool:
        return await respond(
            request,
            writer,
            server,
            status=status,
            body=b"<html>moved</html>",
            headers={"Location": location},
            keep_alive=keep_alive,
        )

    return handler


async def wait_for_hangup(reader: asyncio.StreamReader, limit: float = 60.0) -> None:
    """Wait (at most ``limit`` s) until the client closes its side."""
    try:
        async with asyncio.timeout(limit):
            while await reader.read(65536):
                pass
    except TimeoutError:
        pass


def rst(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0) instead of a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# -- built-in behaviours -------------------------------------------------------


async def not_found(request, reader, writer, server) -> None:
    await respond(request, writer, server, status=404, body=b"<html><title>404</title></html>")


async def ok(request, reader, writer, server) -> None:
    await respond(request, writer, server, body=OK_HTML)


async def drip(request, reader, writer, server) -> None:
    interval = float(request.query.get("interval", "0.5"))
    size = min(int(request.query.get("size", "1000")), MAX_DRIP_BYTES)
    head = head_bytes(200, {"Content-Type": "text/html", "Content-Length": str(size)})
    await send(writer, server, request.path, head)
    for _ in range(size):
        await send(writer, server, request.path, b"a")
        await asyncio.sleep(interval)


async def hang(request, reader, writer, server) -> None:
    await wait_for_hangup(reader)


async def _partial(request, writer, server) -> None:
    declared = int(request.query.get("declared", "1000"))
    sent = int(request.query.get("send", "500"))
    head = head_bytes(200, {"Content-Type": "text/html", "Content-Length": str(declared)})
    await send(writer, server, request.path, head + b"<" * sent)
    await asyncio.sleep(0.05)  # let the client read what was sent before the close


async def reset(request, reader, writer, server) -> None:
    await _partial(request, writer, server)
    rst(writer)


async def short(request, reader, writer, server) -> None:
    await _partial(request, writer, server)
    writer.close()


async def declared_huge(request, reader, writer, server) -> None:
    head = head_bytes(200, {"Content-Type": "text/html", "Content-Length": "2147483648"})
    await send(writer, server, request.path, head)
    for _ in range(1000):  # a trickle, so a client that waits for it waits visibly
        await send(writer, server, request.path, b"x" * 1024)
        await asyncio.sleep(0.05)


async def endless_chunked(request, reader, writer, server) -> None:
    head = head_bytes(200, {"Content-Type": "text/html", "Transfer-Encoding": "chunked"})
    await send(writer, server, request.path, head)
    chunk = b"4000\r\n" + b"0" * 0x4000 + b"\r\n"
    while server.bytes_sent[request.path] < MAX_ENDLESS_BYTES:
        await send(writer, server, request.path, chunk)


def endless_framing(prefix: bytes, filler: bytes, *, limit: int = MAX_ENDLESS_BYTES) -> Handler:
    """A chunked 200 that sends ``prefix`` and then ``filler`` over and over, until
    ``limit`` bytes or the client hangs up: framing (chunk extensions, chunk
    headers, trailers) with next to no body in it."""

    async def handler(request, reader, writer, server) -> None:
        head = head_bytes(200, {"Content-Type": "text/html", "Transfer-Encoding": "chunked"})
        await send(writer, server, request.path, head + prefix)
        batch = filler * max(1, 64 * 1024 // len(filler))
        while server.bytes_sent[request.path] < limit:
            await send(writer, server, request.path, batch)

    return handler


async def chunk_extensions(request, reader, writer, server) -> None:
    size = int(request.query.get("ext", "90000"))
    chunk = b"1;" + b"x" * size + b"\r\na\r\n"
    await endless_framing(b"", chunk)(request, reader, writer, server)


async def head_poison(request, reader, writer, server) -> bool:
    """A HEAD answer that declares a body and then sends one anyway: a whole
    second, fake response, which a client reusing the connection would read
    as the answer to its next request. ``chunked=1`` declares the body with
    Transfer-Encoding instead of Content-Length; ``delay`` seconds between the
    head and the poison put it in the socket after the head was read, instead
    of in the same read."""
    if request.method != "HEAD":
        return await respond(request, writer, server, body=OK_HTML, keep_alive=True)
    poison = response_bytes(body=POISON_HTML, keep_alive=True)
    size = int(request.query.get("size", str(len(poison))))
    framing = (
        {"Transfer-Encoding": "chunked"}
        if request.query.get("chunked") == "1"
        else {"Content-Length": str(size)}
    )
    head = head_bytes(200, {"Content-Type": "text/html", **framing, "Connection": "keep-alive"})
    delay = float(request.query.get("delay", "0"))
    if delay:
        await send(writer, server, request.path, head)
        await asyncio.sleep(delay)
        await send(writer, server, request.path, poison[:size])
    else:
        await send(writer, server, request.path, head + poison[:size])
    return True


async def redirect(request, reader, writer, server) -> None:
    status = int(request.query.get("status", "302"))
    await respond(
        request, writer, server, status=status, headers={"Location": request.query.get("to", "/ok")}
    )


async def chain(request, reader, writer, server) -> None:
    n = int(request.query.get("n", "3"))
    location = f"/chain?n={n - 1}" if n > 0 else "/ok"
    await respond(request, writer, server, status=302, headers={"Location": location})


async def status(request, reader, writer, server) -> None:
    headers = {}
    if "retry_after" in request.query:
        headers["Retry-After"] = request.query["retry_after"]
    if "retry_in" in request.query:
        when = time.time() + float(request.query["retry_in"])
        headers["Retry-After"] = email.utils.formatdate(when, usegmt=True)
    code = int(request.query.get("code", "500"))
    await respond(
        request, writer, server, status=code, body=b"<html>status</html>", headers=headers
    )


async def flaky(request, reader, writer, server) -> None:
    fail = int(request.query.get("fail", "1"))
    code = int(request.query.get("code", "500"))
    if server.requests[request.path] <= fail:
        await respond(request, writer, server, status=code, body=b"<html>try again</html>")
    else:
        await respond(request, writer, server, body=OK_HTML)


class Throttle:
    """A handler for any number of paths: 200 with ``body`` to the first ``allow`` requests, then 429
    Retry-After: ``wait`` to every request for ``wait`` seconds, then 200 again; records when each came."""

    def __init__(self, allow: int, wait: int, body: bytes = OK_HTML) -> None:
        self.allow, self.wait, self.body = allow, wait, body
        self.arrivals: list[float] = []  # time.monotonic() of each request
        self.paused_at: float | None = None

    async def __call__(self, request, reader, writer, server) -> None:
        now = time.monotonic()
        self.arrivals.append(now)
        if self.paused_at is None and len(self.arrivals) > self.allow:
            self.paused_at = now
        if self.paused_at is not None and now < self.paused_at + self.wait:
            await respond(request, writer, server, status=429, body=b"<html>slow down</html>",
                          headers={"Retry-After": str(self.wait)})
        else:
            await respond(request, writer, server, body=self.body)

    def during_pause(self) -> list[float]:
        """When the requests that came in the pause came (each was answered 429)."""
        assert self.paused_at is not None, "the site never throttled"
        return [t for t in self.arrivals if self.paused_at <= t < self.paused_at + self.wait]


class Arrivals:
    """A handler answering 200 after ``delay`` seconds, recording when each request came."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.times: list[float] = []

    async def __call__(self, request, reader, writer, server) -> None:
        self.times.append(time.monotonic())
        await asyncio.sleep(self.delay)
        await respond(request, writer, server, body=OK_HTML)


async def typed(request, reader, writer, server) -> None:
    size = int(request.query.get("size", "1000"))
    content_type = request.query.get("ct", "application/octet-stream")
    await respond(
        request, writer, server, body=b"\x00" * size, headers={"Content-Type": content_type}
    )


async def encoding(request, reader, writer, server) -> None:
    coding = request.query.get("ce", "br")
    await respond(
        request,
        writer,
        server,
        body=b"\x8b\x00junk-not-really-" + coding.encode(),
        headers={"Content-Encoding": coding},
    )


async def bad_status_line(request, reader, writer, server) -> None:
    await send(
        writer, server, request.path, b"HTTP/1.1 OOPS NOT A STATUS\r\nContent-Length: 0\r\n\r\n"
    )


async def http09(request, reader, writer, server) -> None:
    await send(
        writer,
        server,
        request.path,
        b"<html>\r\n\r\n<body>HTTP/0.9 has no status line or headers</body>\r\n</html>\r\n",
    )


async def huge_header(request, reader, writer, server) -> None:
    head = head_bytes(
        200, {"Content-Type": "text/html", "X-Big": "a" * 200_000, "Content-Length": "2"}
    )
    await send(writer, server, request.path, head + b"ok")


async def many_headers(request, reader, writer, server) -> None:
    headers = [(f"X-H{i}", "v" * 8) for i in range(10_000)] + [("Content-Length", "2")]
    await send(writer, server, request.path, head_bytes(200, headers) + b"ok")


async def bad_chunk(request, reader, writer, server) -> None:
    head = head_bytes(200, {"Content-Type": "text/html", "Transfer-Encoding": "chunked"})
    await send(writer, server, request.path, head + b"5\r\nhello\r\nzz-not-hex\r\nxx\r\n0\r\n\r\n")


BUILTIN_ROUTES: dict[str, Handler] = {
    "/ok": ok,
    "/drip": drip,
    "/hang": hang,
    "/reset": reset,
    "/short": short,
    "/declared-huge": declared_huge,
    "/endless-chunked": endless_chunked,
    "/chunk-extensions": chunk_extensions,
    "/redirect": redirect,
    "/loop": redirect_to("/loop"),
    "/ping": redirect_to("/pong"),
    "/pong": redirect_to("/ping"),
    "/chain": chain,
    "/status": status,
    "/flaky": flaky,
    "/type": typed,
    "/encoding": encoding,
    "/bad-status-line": bad_status_line,
    "/http09": http09,
    "/huge-header": huge_header,
    "/many-headers": many_headers,
    "/bad-chunk": bad_chunk,
    "/keep-alive": static(OK_HTML, keep_alive=True),
    "/keep-alive-redirect": redirect_to("/keep-alive", keep_alive=True),
    "/head-poison": head_poison,
}


# -- DNS and connect doubles -----------------------------------------------------


class StubResolver:
    """Scripted DNS: ``answers[host]`` is a list of answers, one per call (the
    last repeats). A host it does not know raises NXDOMAIN. ``calls`` records
    every lookup, so tests can prove a host was resolved exactly once."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        script = self.answers.get(host)
        if not script:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        index = min(self.calls.count(host), len(script)) - 1
        return list(script[index])


class SpyBackend(httpcore.AsyncNetworkBackend):
    """Records every ``connect_tcp(host, port)``; dials only loopback addresses.

    Anything else is refused with ``httpcore.ConnectError`` without a socket,
    so a test can let the guard approve a "public" stub address and still
    generate no traffic outside 127.0.0.0/8.
    """

    def __init__(self) -> None:
        self.dialed: list[tuple[str, int]] = []
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.dialed.append((host, port))
        if not host.startswith("127."):
            raise httpcore.ConnectError(f"spy backend: not dialling {host} outside loopback")
        return await self.inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("spy backend: no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)

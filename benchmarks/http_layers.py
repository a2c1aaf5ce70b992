"""CPU per request through each HTTP layer the fetcher could sit on.

The audit sends every request through ``crawler.fetch.Fetcher``, which since
``crawler/http11.py`` speaks HTTP/1.1 over its own keep-alive pool. This probe
sends the same requests, at the same concurrency, through:

* ``fetcher``: ``Fetcher.check`` (HEAD) or ``Fetcher.fetch`` (GET), all of it:
  SSRF guard, deadlines, retries' bookkeeping, body caps, the result;
* ``pool``: ``http11.Pool`` alone, reading each body to the end;
* ``httpcore``: ``httpcore.AsyncConnectionPool``s of four connections on the
  same netstream sockets, as many as the concurrency needs, each request sent
  through the least busy one: the shape the fetcher used before ``http11``
  (one big httpcore pool costs more, as it scans every connection for every
  request);
* ``httpx``: a default ``httpx.AsyncClient`` (anyio sockets), the usual way
  to use httpx;
* ``protocol`` (run by hand; not one of ``LAYERS``, which ``bench_library``
  runs): the floor, a bare ``asyncio.Protocol`` per keep-alive connection, the
  request's fixed parts built once, the head found with one search and only
  Content-Length framing understood. No crawler can be this thin (it checks
  nothing), so the gap to ``fetcher`` bounds what any leaner HTTP path could
  save per request.

Each layer runs in a fresh process (``bench_library`` starts them) and warms
its connections first, so what is measured is the steady state of a crawl::

    python -m benchmarks.http_layers http://127.0.0.1:8080 --layer fetcher --method HEAD
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time

LAYERS = ("fetcher", "pool", "httpcore", "httpx")


async def _fetcher(base: str, method: str, concurrency: int):
    from crawler.fetch import Fetcher, FetchPolicy
    from crawler.net import AddressGuard

    fetcher = Fetcher(FetchPolicy(), AddressGuard(allow_private=True), concurrency=concurrency)

    async def one(path: str) -> int:
        result = await (fetcher.check(base + path) if method == "HEAD" else fetcher.fetch(base + path))
        return result.status or 0

    return one, fetcher.aclose


async def _pool(base: str, method: str, concurrency: int):
    import ssl

    import httpx

    from crawler.http11 import Pool
    from crawler.netstream import AsyncioBackend

    pool = Pool(
        AsyncioBackend(),
        ssl.create_default_context(),
        connect_timeout=5.0,
        read_timeout=10.0,
        write_timeout=10.0,
        max_idle=concurrency,
    )

    async def one(path: str) -> int:
        response = await pool.send(method.encode(), httpx.URL(base + path), _HEADERS)
        async for _ in response:
            pass
        await response.aclose()
        return response.status

    return one, pool.aclose


async def _httpcore(base: str, method: str, concurrency: int):
    import httpcore

    from crawler.netstream import AsyncioBackend

    # The fetcher's previous shape exactly: ceil(concurrency / 4) pools of four,
    # each request sent through the least busy one, and never more requests in
    # flight than the pools have connections (none ever waits inside a pool).
    per_pool = 4
    pools = [
        httpcore.AsyncConnectionPool(
            max_connections=per_pool, max_keepalive_connections=per_pool, http1=True, http2=False,
            network_backend=AsyncioBackend(),
        )
        for _ in range(math.ceil(concurrency / per_pool))
    ]
    busy = [0] * len(pools)
    slots = asyncio.Semaphore(len(pools) * per_pool)

    async def one(path: str) -> int:
        async with slots:
            index = min(range(len(pools)), key=busy.__getitem__)
            busy[index] += 1
            try:
                response = await pools[index].request(method, base + path, headers=_HEADERS)
            finally:
                busy[index] -= 1
        return response.status

    async def close() -> None:
        for pool in pools:
            await pool.aclose()

    return one, close


async def _httpx(base: str, method: str, concurrency: int):
    import httpx

    client = httpx.AsyncClient(
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        trust_env=False,
    )

    async def one(path: str) -> int:
        response = await client.request(method, base + path, headers=dict(_HEADERS))
        return response.status_code

    return one, client.aclose


async def _protocol(base: str, method: str, concurrency: int):
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    host, port = parts.hostname, parts.port or 80
    loop = asyncio.get_running_loop()
    fields = b"".join(name + b": " + value + b"\r\n" for name, value in _HEADERS)
    prefix = method.encode() + b" "
    suffix = f" HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode() + fields + b"\r\n"

    class Answer(asyncio.Protocol):
        """One connection's answer: strict, so a framing mistake fails the run instead of skewing it."""

        def __init__(self) -> None:
            self.buffer = bytearray()
            self.waiter: asyncio.Future = loop.create_future()
            self.need = -1  # bytes the whole answer takes once its head is in
            self.error = ""  # why this connection can take no more requests

        def fail(self, message: str) -> None:
            self.need = 0
            self.error = self.error or message
            if not self.waiter.done():
                self.waiter.set_exception(SystemExit(f"protocol layer: {message}"))

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            if self.waiter.done():
                self.fail("bytes arrived after the answer was complete")
                return
            if self.need < 0:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(self.buffer[:end]).lower()
                start = head.find(b"\r\ncontent-length:")
                if start < 0:
                    self.fail("only Content-Length framing is understood")
                    return
                line_end = head.find(b"\r\n", start + 2)
                length = int(head[start + 17:line_end if line_end >= 0 else None])
                self.need = end + 4 + (0 if method == "HEAD" else length)
            if len(self.buffer) > self.need:
                self.fail("more bytes than the answer's framing says")
            elif len(self.buffer) == self.need:
                self.waiter.set_result(None)

        def connection_lost(self, exc: Exception | None) -> None:
            self.fail(f"the server closed the connection ({exc or 'end of stream'})")

    idle = []
    for _ in range(concurrency):
        transport, answer = await loop.create_connection(Answer, host, port)
        idle.append((transport, answer))

    async def one(path: str) -> int:
        transport, answer = idle.pop()
        if answer.error or answer.buffer:
            raise SystemExit(f"protocol layer: {answer.error or 'bytes left over from the last answer'}")
        answer.need = -1
        answer.waiter = loop.create_future()
        transport.write(prefix + path.encode() + suffix)
        await answer.waiter
        status = int(answer.buffer[9:12])
        answer.buffer.clear()
        idle.append((transport, answer))
        return status

    async def close() -> None:
        for transport, _answer in idle:
            transport.close()

    return one, close


_HEADERS = [(b"User-Agent", b"SitewardBench"), (b"Accept", b"*/*"), (b"Accept-Encoding", b"gzip, deflate")]
_MAKERS = {"fetcher": _fetcher, "pool": _pool, "httpcore": _httpcore, "httpx": _httpx, "protocol": _protocol}


async def _run(base: str, paths: list[str], layer: str, method: str, requests: int, concurrency: int) -> dict:
    one, close = await _MAKERS[layer](base, method, concurrency)
    statuses: dict[int, int] = {}

    async def burst(count: int) -> None:
        counter = iter(range(count))

        async def worker() -> None:
            for i in counter:
                status = await one(paths[i % len(paths)])
                statuses[status] = statuses.get(status, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    await burst(4 * concurrency)  # dial and warm every connection first
    statuses.clear()
    cpu, wall = time.process_time(), time.monotonic()
    await burst(requests)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    await close()
    if set(statuses) != {200}:
        raise SystemExit(f"{layer}: unexpected statuses {statuses}")
    return {
        "layer": layer,
        "method": method,
        "requests": requests,
        "concurrency": concurrency,
        "cpu_ms_per_request": 1000 * cpu / requests,
        "statuses": statuses,
        "requests_per_second": requests / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--layer", choices=list(_MAKERS), required=True)
    parser.add_argument("--method", choices=("HEAD", "GET"), default="HEAD")
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--pages", type=int, default=200, help="corpus pages to cycle through")
    args = parser.parse_args()
    from benchmarks.corpus import page_path
    from benchmarks.netguard import refuse_non_loopback
    from crawler.loop import run

    refuse_non_loopback()
    paths = [page_path(i) for i in range(args.pages)]
    print(json.dumps(run(_run(args.base.rstrip("/"), paths, args.layer, args.method, args.requests, args.concurrency))))


if __name__ == "__main__":
    main()

"""Where a gzip body ends: a member that ends with a chunk is not the last one, and too
many members is the decompression limit, never a page silently cut short."""

from __future__ import annotations

import asyncio
import gzip

from crawler.fetch import Fetcher, FetchPolicy
from crawler.inflate import MAX_GZIP_MEMBERS
from crawler.net import AddressGuard
from crawler.types import FetchError
from tests.crawler.hostile_server import HostileServer, Sleeps, head_bytes, send, static

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0)


def fetch(server: HostileServer, path: str):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps()) as fetcher:
            return await fetcher.fetch(server.url(path))

    return asyncio.run(run())


def in_chunks(*chunks: bytes):
    """A chunked gzip body, each of ``chunks`` sent as one chunk a moment after the last."""

    async def handler(request, reader, writer, server) -> None:
        head = head_bytes(200, {"Content-Type": "text/html", "Content-Encoding": "gzip",
                                "Transfer-Encoding": "chunked", "Connection": "close"})
        await send(writer, server, request.path, head)
        for chunk in chunks:
            await send(writer, server, request.path, b"%x\r\n%b\r\n" % (len(chunk), chunk))
            await asyncio.sleep(0.02)  # read apart, so a member's end is a chunk's end
        await send(writer, server, request.path, b"0\r\n\r\n")

    return handler


def test_a_gzip_member_ending_with_its_chunk_is_followed_by_the_next_member(server):
    server.route("/members", in_chunks(gzip.compress(b"<p>one</p>"), gzip.compress(b"<p>two</p>")))
    result = fetch(server, "/members")
    assert result.error is None and result.body == b"<p>one</p><p>two</p>"


def test_more_gzip_members_than_the_limit_is_the_decompression_limit(server):
    members = b"".join(gzip.compress(b"<p>%d</p>" % n) for n in range(MAX_GZIP_MEMBERS + 1))
    server.route("/many", static(members, headers={"Content-Encoding": "gzip"}))
    result = fetch(server, "/many")
    assert result.error is FetchError.DECOMPRESSION_LIMIT
    assert f"more than {MAX_GZIP_MEMBERS} gzip members" in result.error_detail

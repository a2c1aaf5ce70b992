"""Where a gzip or deflate body ends: a stream cut short is an incomplete body, a member
that ends with a chunk is not the last one, and too many members is the decompression
limit, never a page silently cut short."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import pytest

from crawler.fetch import Fetcher, FetchPolicy
from crawler.inflate import MAX_GZIP_MEMBERS
from crawler.net import AddressGuard
from crawler.types import FetchError
from tests.crawler.hostile_server import HostileServer, Sleeps, head_bytes, send, static

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0)
PAGE = b"<!doctype html><html><head><title>Cut</title></head><body>" + b"<p>word</p>" * 2000 + b"</body></html>"


def fetch(server: HostileServer, path: str):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps()) as fetcher:
            return await fetcher.fetch(server.url(path))

    return asyncio.run(run())


def until_close(body: bytes, coding: str):
    """A body with neither Content-Length nor chunking: it ends where the server closes."""

    async def handler(request, reader, writer, server) -> None:
        head = head_bytes(200, {"Content-Type": "text/html", "Content-Encoding": coding, "Connection": "close"})
        await send(writer, server, request.path, head + body)
        writer.close()

    return handler


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


@pytest.mark.parametrize(("coding", "encode"), [("gzip", gzip.compress), ("deflate", zlib.compress)])
def test_a_compressed_body_cut_short_by_the_close_is_incomplete_not_a_page(server, coding, encode):
    wire = encode(PAGE)
    server.route("/cut", until_close(wire[: len(wire) // 2], coding))
    result = fetch(server, "/cut")
    assert (result.status, result.error) == (200, FetchError.INCOMPLETE_BODY)
    assert result.body is None


def test_a_whole_compressed_body_ended_by_the_close_is_the_page(server):
    server.route("/whole", until_close(gzip.compress(PAGE), "gzip"))
    result = fetch(server, "/whole")
    assert result.error is None and result.body == PAGE


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

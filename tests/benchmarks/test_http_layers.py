"""The HTTP layers probe: its floor layer must take each answer whole, never more, never less."""

import asyncio

import pytest

from benchmarks.http_layers import _run
from crawler.loop import run
from tests.crawler.hostile_server import HostileServer, head_bytes, response_bytes, send

BODY = bytes(range(256)) * 160  # 40 KB


async def split_body(request, reader, writer, server) -> bool:
    """A keep-alive answer whose body comes in two writes 20 ms apart, so a
    client that stopped at the head would read the rest as the next answer."""
    head = response_bytes(body=BODY, keep_alive=True, head_only=True)
    if request.method == "HEAD":
        await send(writer, server, request.path, head)
        return True
    await send(writer, server, request.path, head + BODY[:1000])
    await asyncio.sleep(0.02)
    await send(writer, server, request.path, BODY[1000:])
    return True


async def chunked(request, reader, writer, server) -> bool:
    head = head_bytes(200, {"Transfer-Encoding": "chunked", "Connection": "keep-alive"})
    await send(writer, server, request.path, head + b"5\r\nhello\r\n0\r\n\r\n")
    return True


def _probe(server: HostileServer, path: str, method: str, requests: int) -> dict:
    async def probe():
        return await asyncio.wait_for(_run(server.origin, [path], "protocol", method, requests, 2), 20)
    return run(probe())


def test_the_protocol_floor_waits_for_each_get_body_that_arrives_in_parts():
    with HostileServer() as server:
        server.route("/split", split_body)
        result = _probe(server, "/split", "GET", 30)
    assert result["statuses"] == {200: 30}


def test_the_protocol_floor_takes_a_head_answer_without_waiting_for_a_body():
    with HostileServer() as server:
        server.route("/split", split_body)
        result = _probe(server, "/split", "HEAD", 30)
    assert result["statuses"] == {200: 30}


def test_the_protocol_floor_refuses_an_answer_without_a_content_length():
    with HostileServer() as server, pytest.raises(SystemExit, match="Content-Length"):
        server.route("/chunked", chunked)
        _probe(server, "/chunked", "GET", 4)

"""The HTTP layers probe: its floor layer must take each answer whole, never more, never less."""

import asyncio
import contextlib
import socketserver
import threading
import time

import pytest

from benchmarks.http_layers import _run
from crawler.loop import run

BODY = bytes(range(256)) * 160  # 40 KB


class _SplitAnswers(socketserver.BaseRequestHandler):
    """Keep-alive answers whose body comes in two writes 20 ms apart, so a
    client that stopped at the head would read the rest as the next answer."""

    chunked = False

    def handle(self):
        pending = b""
        while True:
            while b"\r\n\r\n" not in pending:
                data = self.request.recv(65536)
                if not data:
                    return
                pending += data
            head, _, pending = pending.partition(b"\r\n\r\n")
            if self.chunked:
                self.request.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                     b"5\r\nhello\r\n0\r\n\r\n")
                continue
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(BODY))
            if head.startswith(b"GET "):
                self.request.sendall(BODY[:1000])
                time.sleep(0.02)
                self.request.sendall(BODY[1000:])


class _ChunkedAnswers(_SplitAnswers):
    chunked = True


@contextlib.contextmanager
def _server(handler=_SplitAnswers):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _probe(base: str, method: str, requests: int) -> dict:
    async def probe():
        return await asyncio.wait_for(_run(base, ["/a", "/b"], "protocol", method, requests, 2), 20)
    return run(probe())


def test_the_protocol_floor_waits_for_each_get_body_that_arrives_in_parts():
    with _server() as base:
        result = _probe(base, "GET", 30)
    assert result["statuses"] == {200: 30}


def test_the_protocol_floor_takes_a_head_answer_without_waiting_for_a_body():
    with _server() as base:
        result = _probe(base, "HEAD", 30)
    assert result["statuses"] == {200: 30}


def test_the_protocol_floor_refuses_an_answer_without_a_content_length():
    with _server(_ChunkedAnswers) as base, pytest.raises(SystemExit, match="Content-Length"):
        _probe(base, "GET", 4)

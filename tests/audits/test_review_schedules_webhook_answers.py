"""A webhook's answer read no further than needed: a 2xx head is a delivery, whatever its body does next.

The servers are raw sockets on 127.0.0.1; ALLOW_PRIVATE_TARGETS lets the webhook guard reach them.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from audits.notify import notify
from tests.audits.test_notify import CRITICAL_NEW, ended, rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def alerts(settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "WEBHOOK_TIMEOUT": 1.0,
                         "BASE_URL": "https://siteward.test"}
    return settings



@pytest.fixture
def stalling_server():
    """Answers each POST with ``head`` and then sends nothing more, holding the connection open."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()
    held: list[socket.socket] = []
    answer = {"head": b""}

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)
            conn.settimeout(5)
            try:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                conn.sendall(answer["head"])
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], answer
    stop.set()
    thread.join(timeout=5)
    listener.close()
    for conn in held:
        conn.close()


@pytest.mark.parametrize("body_start", [b"", b"{\"ok\":"])
def test_a_2xx_whose_body_then_stalls_is_recorded_sent_without_waiting_for_the_body(
        alerts, owner, stalling_server, body_start):
    port, answer = stalling_server
    answer["head"] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + body_start
    audit = ended(owner, new=CRITICAL_NEW, webhook=f"http://127.0.0.1:{port}/hook")

    started = time.monotonic()
    notify(audit.pk)

    assert rows(audit)["webhook"] == ("sent", "HTTP 200")
    assert time.monotonic() - started < 1.0

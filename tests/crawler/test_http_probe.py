"""http_not_redirected: the http:// form of an https start page, probed against real
loopback servers, an HTTPS one (a trustme certificate for "shop.test") and a plain one.

The probe builds ``http://shop.test/`` from ``https://shop.test/``, so it dials ports 80
and 443. A network backend below the SSRF guard sends those two ports to the two
ephemeral loopback servers (and refuses anything off loopback); everything above it,
the guard, the Fetcher, TLS verification and the probe, is the production code path.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
import time

import httpcore
import pytest
import trustme

from crawler.fetch import Fetcher, FetchPolicy
from crawler.http_probe import http_form, probe_http_form
from crawler.net import AddressGuard
from crawler.types import Severity
from tests.crawler.hostile_server import (
    BUILTIN_ROUTES,
    OK_HTML,
    HostileServer,
    StubResolver,
    redirect_to,
    static,
)

HOST = "shop.test"
START = f"https://{HOST}/"
POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0)


class PortMap(httpcore.AsyncNetworkBackend):
    """Dials ``ports[port]`` on loopback instead of ``port``; records every dial. A port mapped to None
    cannot be reached, as when a firewall drops it and a router says so."""

    def __init__(self, ports: dict[int, int | None]) -> None:
        self.ports = ports
        self.dialed: list[tuple[str, int]] = []
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.dialed.append((host, port))
        if not host.startswith("127.") or port not in self.ports:
            raise httpcore.ConnectError(f"test backend: not dialling {host}:{port}")
        if self.ports[port] is None:
            # Raised while handling the socket's error, as anyio does: the pool re-raises "from None",
            # so the errno is found through the context.
            try:
                raise OSError(errno.EHOSTUNREACH, os.strerror(errno.EHOSTUNREACH))
            except OSError as exc:
                raise httpcore.ConnectError("All connection attempts failed") from exc
        return await self.inner.connect_tcp(host, self.ports[port], timeout=timeout,
                                            local_address=local_address, socket_options=socket_options)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("test backend: no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


async def _no_wait(seconds: float) -> None:
    """Retry backoff without the wait (a refused port is retried by the policy)."""


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture
def https_site(ca):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(HOST).configure_cert(context)
    with HostileServer(ssl_context=context) as server:
        server.route("/", static(OK_HTML))
        yield server


@pytest.fixture
def http_site():
    with HostileServer() as server:
        yield server


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def probe(ca, https_port: int, http_port: int | None, url: str = START, **kwargs):
    backend = PortMap({443: https_port, 80: http_port})
    guard = AddressGuard(resolver=StubResolver({HOST: [["127.0.0.1"]]}),
                         allowed_targets=[("127.0.0.1", 443), ("127.0.0.1", 80)])
    client = ssl.create_default_context()
    ca.configure_trust(client)

    async def run():
        async with Fetcher(POLICY, guard, verify=client, network_backend=backend, sleep=_no_wait) as fetcher:
            return await probe_http_form(fetcher, url, **kwargs)

    probed = asyncio.run(run())
    return probed.finding, backend, probed.unsure


def test_an_http_form_that_redirects_to_https_is_fine(ca, https_site, http_site):
    http_site.route("/", redirect_to(START, 301))
    found, backend, unsure = probe(ca, https_site.port, http_site.port)
    assert found is None and unsure == ""  # a verdict: fixed, for an earlier audit's issue
    assert http_site.requests["/"] == 1  # the probe did ask over http, once
    assert https_site.requests["/"] == 1  # and followed the redirect to the https page
    assert [port for _, port in backend.dialed] == [80, 443]


def test_an_http_form_that_serves_200_is_reported(ca, https_site, http_site):
    http_site.route("/", static(OK_HTML))
    found, _, unsure = probe(ca, https_site.port, http_site.port)
    assert found is not None and unsure == ""
    assert (found.code, found.severity, found.target_url) == ("http_not_redirected", Severity.WARNING,
                                                             f"http://{HOST}/")
    assert found.message == f"http://{HOST}/ answers 200 over plain http instead of redirecting to https://"
    assert http_site.requests["/"] == 1 and https_site.requests["/"] == 0


def test_an_http_form_that_redirects_within_http_to_a_200_is_reported(ca, https_site, http_site):
    http_site.route("/", redirect_to(f"http://{HOST}/home", 301))
    http_site.route("/home", static(OK_HTML))
    found, _, _ = probe(ca, https_site.port, http_site.port)
    assert found is not None and found.code == "http_not_redirected"
    assert found.message.startswith(f"http://{HOST}/ redirects to http://{HOST}/home, which answers 200")


def test_an_http_chain_that_reaches_https_in_the_end_is_fine(ca, https_site, http_site):
    http_site.route("/", redirect_to(f"http://{HOST}/next", 301))
    http_site.route("/next", redirect_to(START, 301))
    found, _, unsure = probe(ca, https_site.port, http_site.port)
    assert found is None and unsure == ""
    assert http_site.requests["/next"] == 1 and https_site.requests["/"] == 1


def test_a_refused_http_port_is_fine_since_no_page_is_served(ca, https_site):
    """The host answered that nothing listens for http: a verdict, so an earlier audit's issue is fixed."""
    refused = closed_port()
    found, backend, unsure = probe(ca, https_site.port, refused)
    assert found is None and unsure == ""
    assert ("127.0.0.1", 80) in backend.dialed  # it was tried, and refused
    assert https_site.requests["/"] == 0


def test_an_http_port_that_cannot_be_reached_is_no_finding_and_no_verdict(ca, https_site):
    """Not refused by the host: the connection failed on the way, which may pass."""
    found, backend, unsure = probe(ca, https_site.port, None)
    assert found is None
    assert unsure == f"http://{HOST}/: Could not connect: {os.strerror(errno.EHOSTUNREACH)}"
    assert ("127.0.0.1", 80) in backend.dialed


@pytest.mark.parametrize("status", [401, 403, 429, 999])
def test_an_http_status_that_refuses_crawlers_is_no_finding_and_no_verdict(ca, https_site, http_site, status):
    """A bot wall answering the probe says nothing of what browsers get over http: an earlier issue stays unknown."""
    http_site.route("/", static(b"go away", status=status))
    found, _, unsure = probe(ca, https_site.port, http_site.port)
    assert found is None
    assert unsure.startswith(f"http://{HOST}/ answered {status}, which refuses crawlers")


def test_an_http_error_status_is_fine_since_no_page_is_served(ca, https_site, http_site):
    http_site.route("/", static(b"gone", status=404))
    found, _, unsure = probe(ca, https_site.port, http_site.port)
    assert found is None and unsure == "" and http_site.requests["/"] == 1


def test_an_http_server_error_is_no_finding_and_no_verdict(ca, https_site, http_site):
    http_site.route("/", static(b"down", status=503))
    found, _, unsure = probe(ca, https_site.port, http_site.port)
    assert found is None and unsure == f"http://{HOST}/ answered 503"


def test_an_http_port_that_never_answers_ends_the_probe_at_its_budget(ca, https_site, http_site):
    http_site.route("/", BUILTIN_ROUTES["/hang"])
    began = time.monotonic()
    found, _, unsure = probe(ca, https_site.port, http_site.port, budget=0.5)
    took = time.monotonic() - began
    assert found is None and http_site.requests["/"] == 1
    assert unsure == f"http://{HOST}/ gave no answer in time (0.5 s)"
    assert took < POLICY.deadline  # cut by the probe's budget, not the fetch deadline or its retries


def test_a_start_url_already_on_http_is_not_probed_at_all(ca, https_site, http_site):
    http_site.route("/", static(OK_HTML))
    found, backend, unsure = probe(ca, https_site.port, http_site.port, url=f"http://{HOST}/")
    assert found is None and "no http:// form" in unsure
    assert backend.dialed == [] and http_site.connections == 0 and https_site.connections == 0


@pytest.mark.parametrize(("url", "expected"), [
    ("https://shop.test/", "http://shop.test/"),
    ("https://shop.test:443/a/b?q=1", "http://shop.test/a/b?q=1"),
    ("https://shop.test", "http://shop.test/"),
    ("https://user:secret@shop.test/private", "http://shop.test/private"),  # no credentials over http
    ("https://[2001:db8::1]/x", "http://[2001:db8::1]/x"),
    ("https://shop.test:8443/", None),  # no known http twin for another port
    ("http://shop.test/", None),
    ("ftp://shop.test/", None),
])
def test_the_http_form_of_a_url(url, expected):
    assert http_form(url) == expected

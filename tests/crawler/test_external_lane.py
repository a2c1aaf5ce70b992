"""External checks beside the crawl: slow DNS for other sites holds neither the site's
window slots nor the threads its own lookups run on.

The site is a loopback server reached as site.test; every name is answered by a
stub (no real DNS), and the slow external names fail after their delay, as a
nameserver that never answers does.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

from crawler.errors import DnsFailure
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import LANE_DNS_THREADS, AddressGuard, LookupLane
from crawler.side_lane import SideLane
from crawler.types import FetchError
from crawler.window import WindowPolicy, fetch_health, run_window
from tests.crawler.hostile_server import OK_HTML, static

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=10.0, max_retries=0)
SLOW_DNS = 2.0


class SlowExternalDns:
    """site.test is 127.0.0.1 at once; any other name fails after SLOW_DNS seconds (blocking, as getaddrinfo)."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def __call__(self, host: str, port: int) -> list[str]:
        if host == "site.test":
            return ["127.0.0.1"]
        self.threads.add(threading.current_thread().name)
        time.sleep(SLOW_DNS)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def test_pages_finish_long_before_externals_whose_dns_takes_seconds(server):
    for n in range(50):
        server.route(f"/p/{n}", static(OK_HTML, keep_alive=True))
    pages = [f"http://site.test:{server.port}/p/{n}" for n in range(50)]
    externals = [f"http://slow-{n}.test/" for n in range(16)]
    # Externals spread among the pages, as a chunk's lease gives them.
    items = [url for pair in zip(externals, pages, strict=False) for url in pair] + pages[len(externals):]
    dns = SlowExternalDns()
    guard = AddressGuard(resolver=dns, allowed_targets=[("127.0.0.1", server.port)])
    window = WindowPolicy(floor=1, start=4, cap=4, per_host=4)
    ended: dict[str, tuple[float, object]] = {}

    async def crawl():
        async with (Fetcher(POLICY, guard, concurrency=window.cap) as fetcher,
                    Fetcher(POLICY, guard.in_lane(LookupLane()), concurrency=8) as checker):

            async def work(url: str):
                result = await (checker.check(url) if ".test/" in url and "site.test" not in url
                                else fetcher.fetch(url))
                ended[url] = (time.monotonic(), result)
                return result

            async def sink(batch) -> None:
                pass

            return await run_window(
                items, work, sink, policy=window, host_of=lambda url: url.split("/")[2],
                health_of=lambda result: fetch_health(result, window),
                side_lane=SideLane(slots=8, per_host=2), in_side_lane=lambda url: url in externals)

    began = time.monotonic()
    report = asyncio.run(crawl())

    page_ends = [ended[url][0] for url in pages]
    external_ends = [ended[url][0] for url in externals]
    assert all(ended[url][1].status == 200 for url in pages)
    assert all(ended[url][1].error is FetchError.DNS_FAILURE for url in externals)
    assert max(page_ends) < min(external_ends)  # every page before the first external settled
    assert max(page_ends) - began < SLOW_DNS / 2
    assert report.shrinks == 0  # failing externals said nothing about the site
    # The externals' blocking lookups ran on the lane's own threads.
    assert dns.threads and all(name.startswith("lane-dns") for name in dns.threads)


def test_hung_external_lookups_leave_the_sites_lookups_their_threads(monkeypatch):
    """More hung external lookups than the crawl's whole DNS pool: the site's name still
    resolves at once, since the lane's lookups hold only the lane's threads. The C
    library is stubbed: hang*.test never answers, site.test does."""
    release = threading.Event()
    real = socket.getaddrinfo
    lane_threads: set[str] = set()

    def stub(host, port, *args, **kwargs):
        if kwargs.get("flags", 0) & socket.AI_NUMERICHOST:
            return real(host, port, *args, **kwargs)  # the literal-address check: no DNS
        if host.startswith("hang"):
            lane_threads.add(threading.current_thread().name)
            release.wait(10)
            raise socket.gaierror(socket.EAI_AGAIN, "stub: no answer")
        if host == "site.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]
        raise socket.gaierror(socket.EAI_NONAME, "stub: unknown")

    monkeypatch.setattr(socket, "getaddrinfo", stub)
    site = AddressGuard(dns_timeout=1.0)

    async def crawl():
        external = site.in_lane(LookupLane())
        hung = [asyncio.ensure_future(external.resolve(f"hang{n}.test", 80)) for n in range(40)]
        await asyncio.sleep(0.1)  # the hung lookups take what threads they can first
        started = time.monotonic()
        address = await site.resolve("site.test", 80)
        took = time.monotonic() - started
        outcomes = await asyncio.gather(*hung, return_exceptions=True)
        return address, took, outcomes

    try:
        address, took, outcomes = asyncio.run(crawl())
    finally:
        release.set()
    assert address == "93.184.216.34" and took < 0.5  # behind a hung lookup: its 1 s timeout
    assert all(isinstance(outcome, DnsFailure) for outcome in outcomes)
    assert len(lane_threads) <= LANE_DNS_THREADS

"""The SSRF guard: classification, resolution, pinning and proxy isolation.

Refused ranges are only ever exercised through pure functions, a stub
resolver and a spy backend that dials nothing outside 127.0.0.0/8; the real
connections go to loopback servers of our own.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
import urllib.parse

import httpcore
import pytest

from crawler.errors import DnsFailure, UnsafeAddress
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard, GuardedBackend, classify
from crawler.types import FetchError
from tests.crawler.hostile_server import HostileServer, SpyBackend, StubResolver

FAST = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=2.0, max_retries=0)


async def _no_sleep(seconds: float) -> None:
    return None


def _forbid_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"DNS was asked about {host!r}; numeric hosts must never reach DNS")


# -- classify -------------------------------------------------------------------

CLASSIFY_CASES = [
    # Public addresses pass.
    ("8.8.8.8", None),
    ("1.1.1.1", None),
    ("2606:4700:4700::1111", None),
    ("::ffff:8.8.8.8", None),  # mapped form of a public address is that address
    ("2002:808:808::1", None),  # 6to4 of a public address
    # IPv4 special ranges.
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "cgnat"),
    ("100.127.255.254", "cgnat"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("255.255.255.255", "broadcast"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("192.0.0.8", "reserved"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    # IPv6 special ranges.
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("fec0::1", "site-local"),
    ("fc00::1", "private"),
    ("fd12:3456:789a::1", "private"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("2001:2::1", "benchmarking"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "teredo"),
    ("2001:10::1", "reserved"),  # ORCHID
    ("100::1", "reserved"),  # discard prefix
    ("4000::1", "reserved"),  # outside 2000::/3, not allocated
    # IPv6 forms that embed IPv4: unwrapped and judged by the IPv4 inside.
    ("::ffff:127.0.0.1", "ipv4-mapped"),
    ("::ffff:169.254.169.254", "ipv4-mapped"),
    ("::ffff:10.0.0.1", "ipv4-mapped"),
    ("::127.0.0.1", "ipv4-compatible"),
    ("::10.0.0.1", "ipv4-compatible"),
    ("64:ff9b::7f00:1", "nat64"),
    ("64:ff9b::808:808", "nat64"),
    ("64:ff9b:1::a00:1", "nat64"),
    ("2002:7f00:1::", "6to4"),
    ("2002:a9fe:a9fe::1", "6to4"),
    ("2002:c0a8:101::1", "6to4"),
]


@pytest.mark.parametrize(("address", "reason"), CLASSIFY_CASES)
def test_classify_names_why_an_address_is_not_public(address, reason):
    assert classify(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    "address", ["224.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "::127.0.0.1"]
)
def test_classify_refuses_what_is_global_alone_would_let_through(address):
    # RELIABILITY.md item 9: is_global said True for these on 3.11.7; whatever
    # this interpreter says, the explicit table refuses them.
    assert classify(ipaddress.ip_address(address)) is not None


# -- URL spellings (RELIABILITY.md row 41) ----------------------------------------

ROW_41_URLS = [
    "http://2130706433/",
    "http://0x7f.1/",
    "http://127.1/",
    "http://0177.0.0.1/",
    "http://0x7f000001/",
    "http://017700000001/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://[::]/",
    "http://0.0.0.0/",
    "http://[fe80::1%25eth0]/",
    "http://localhost./",
    "http://LOCALHOST/",
    "http://app.localhost/",
    "http://user@evil@127.0.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:a9fe:a9fe]/",
]


def _host_and_port(url: str) -> tuple[str, int]:
    # urllib rather than httpx: httpx rejects some spellings (0177.0.0.1)
    # outright, and the guard must refuse them even from a lenient parser.
    parts = urllib.parse.urlsplit(url)
    return parts.hostname or "", parts.port or 80


@pytest.mark.parametrize("url", ROW_41_URLS)
def test_every_loopback_spelling_is_refused_without_asking_dns(url):
    guard = AddressGuard(resolver=_forbid_dns)
    host, port = _host_and_port(url)
    with pytest.raises((UnsafeAddress, DnsFailure)):
        guard.resolve_sync(host, port)


@pytest.mark.parametrize("url", ROW_41_URLS)
def test_every_loopback_spelling_is_refused_by_the_fetcher_before_any_connect(url):
    spy = SpyBackend()

    async def run():
        async with Fetcher(
            FAST, AddressGuard(resolver=_forbid_dns), network_backend=spy
        ) as fetcher:
            return await fetcher.fetch(url)

    result = asyncio.run(run())
    assert result.error in (FetchError.SSRF_BLOCKED, FetchError.INVALID_URL, FetchError.DNS_FAILURE)
    assert spy.dialed == []


def test_numeric_spellings_resolve_to_the_address_the_c_library_means():
    # With loopback allowed the guard returns the real address, proving the
    # check ran on 127.0.0.1 and not on the odd spelling.
    guard = AddressGuard(allow_private=True, resolver=_forbid_dns)
    for spelling in ("2130706433", "0x7f.1", "127.1", "0177.0.0.1"):
        assert guard.resolve_sync(spelling, 80) == "127.0.0.1"


# -- resolution policy -------------------------------------------------------------


def test_metadata_address_is_refused_even_with_private_targets_allowed():
    guard = AddressGuard(
        allow_private=True, resolver=StubResolver({"meta.test": [["169.254.169.254"]]})
    )
    with pytest.raises(UnsafeAddress) as caught:
        guard.resolve_sync("meta.test", 80)
    assert caught.value.reason == "link-local"
    assert caught.value.address == "169.254.169.254"
    assert "169.254.169.254" not in caught.value.message  # a name's address is kept, not told


@pytest.mark.parametrize("address", ["10.0.0.5", "192.168.1.10", "127.0.0.1", "fd00::5"])
def test_allow_private_admits_private_and_loopback_sites(address):
    stub = StubResolver({"staging.test": [[address]]})
    assert (
        AddressGuard(allow_private=True, resolver=stub).resolve_sync("staging.test", 443) == address
    )
    with pytest.raises(UnsafeAddress):
        AddressGuard(resolver=stub).resolve_sync("staging.test", 443)


@pytest.mark.parametrize(
    "address",
    ["100.64.0.1", "0.0.0.0", "224.0.0.1", "::ffff:127.0.0.1", "64:ff9b::a00:1", "169.254.1.1", "fe80::1"],
)
def test_allow_private_still_refuses_everything_else(address):
    guard = AddressGuard(allow_private=True, resolver=StubResolver({"x.test": [[address]]}))
    with pytest.raises(UnsafeAddress):
        guard.resolve_sync("x.test", 80)


def test_allowed_targets_admit_exactly_one_address_and_port():
    guard = AddressGuard(allowed_targets=[("127.0.0.1", 8123)], resolver=_forbid_dns)
    assert guard.resolve_sync("127.0.0.1", 8123) == "127.0.0.1"
    with pytest.raises(UnsafeAddress):
        guard.resolve_sync("127.0.0.1", 8124)
    with pytest.raises(UnsafeAddress):
        guard.resolve_sync("127.0.0.2", 8123)


@pytest.mark.parametrize(
    "answer",
    [["93.184.216.34", "127.0.0.1"], ["10.0.0.1", "93.184.216.34"], ["2606:2800:220:1::1", "::1"]],
)
def test_a_mixed_public_and_private_answer_is_refused(answer):
    guard = AddressGuard(resolver=StubResolver({"mixed.test": [answer]}))
    with pytest.raises(UnsafeAddress):
        guard.resolve_sync("mixed.test", 80)
    with pytest.raises(UnsafeAddress):
        asyncio.run(guard.resolve("mixed.test", 80))


def test_a_public_answer_returns_its_first_address_once_per_lookup():
    stub = StubResolver({"site.test": [["93.184.216.34", "93.184.216.34", "2606:2800:220:1::1"]]})
    guard = AddressGuard(resolver=stub)
    assert asyncio.run(guard.resolve("site.test", 443)) == "93.184.216.34"
    assert guard.resolve_sync("site.test", 443) == "93.184.216.34"
    assert stub.calls == ["site.test", "site.test"]


def test_the_addresses_to_dial_take_the_families_in_turn_after_the_first_and_are_few():
    stub = StubResolver({"site.test": [["2606:2800:220:1::1", "2606:2800:220:1::2", "2606:2800:220:1::3",
                                        "93.184.216.34", "93.184.216.35"]]})
    assert asyncio.run(AddressGuard(resolver=stub).resolve_all("site.test", 443)) == [
        "2606:2800:220:1::1", "93.184.216.34", "2606:2800:220:1::2", "93.184.216.35"]


def test_a_host_whose_first_address_refuses_is_reached_on_the_next():
    """A dead AAAA (IPv6 routes but no IPv6) must not fail every fetch: 127.0.0.2 has no listener here."""
    with HostileServer() as server:
        stub = StubResolver({"site.test": [["127.0.0.2", "127.0.0.1"]]})
        guard = AddressGuard(resolver=stub, allowed_targets=[("127.0.0.2", server.port), ("127.0.0.1", server.port)])

        async def go():
            async with Fetcher(FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0), guard) as fetcher:
                return await fetcher.fetch(f"http://site.test:{server.port}/ok")

        result = asyncio.run(go())
    assert result.status == 200 and result.error is None


def test_nxdomain_is_a_dns_failure_that_names_the_host():
    guard = AddressGuard(resolver=StubResolver({}))
    with pytest.raises(DnsFailure, match="nowhere.test does not exist"):
        guard.resolve_sync("nowhere.test", 80)
    with pytest.raises(DnsFailure, match="does not exist"):
        asyncio.run(guard.resolve("nowhere.test", 80))


RETRYING = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=2.0, max_retries=2)


def fetch_resolved_by(resolver, server: HostileServer, dns_timeout: float = 1.0):
    """Fetch /ok of ``server`` as site.test, its lookups answered by ``resolver``."""
    guard = AddressGuard(resolver=resolver, allowed_targets=[("127.0.0.1", server.port)], dns_timeout=dns_timeout)

    async def run():
        async with Fetcher(RETRYING, guard, sleep=_no_sleep) as fetcher:
            return await fetcher.fetch(f"http://site.test:{server.port}/ok")

    return asyncio.run(run())


def test_a_temporary_dns_failure_is_retried_like_a_failed_connect(server):
    calls: list[str] = []

    def hiccup(host: str, port: int) -> list[str]:
        calls.append(host)
        if len(calls) == 1:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return ["127.0.0.1"]

    result = fetch_resolved_by(hiccup, server)
    assert (result.status, result.error, result.attempts) == (200, None, 2)
    assert calls == ["site.test", "site.test"]


def test_a_dns_lookup_that_times_out_is_retried(server):
    calls: list[str] = []

    async def slow_once(host: str, port: int) -> list[str]:
        calls.append(host)
        if len(calls) == 1:
            await asyncio.sleep(30)
        return ["127.0.0.1"]

    result = fetch_resolved_by(slow_once, server, dns_timeout=0.2)
    assert (result.status, result.error, result.attempts) == (200, None, 2)


def test_a_resolver_that_stays_unavailable_ends_as_a_dns_failure_after_the_retries(server):
    def down(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    result = fetch_resolved_by(down, server)
    assert (result.error, result.attempts) == (FetchError.DNS_FAILURE, 1 + RETRYING.max_retries)
    assert "Temporary failure in name resolution" in result.error_detail


def test_nxdomain_is_final_and_never_asked_again(server):
    stub = StubResolver({})
    result = fetch_resolved_by(stub, server)
    assert (result.error, result.attempts) == (FetchError.DNS_FAILURE, 1)
    assert stub.calls == ["site.test"] and "does not exist" in result.error_detail
    assert server.requests["/ok"] == 0


@pytest.mark.parametrize("answer", [[], ["not-an-address"]])
def test_an_empty_or_garbled_dns_answer_is_a_dns_failure(answer):
    guard = AddressGuard(resolver=StubResolver({"odd.test": [answer]}))
    with pytest.raises(DnsFailure):
        guard.resolve_sync("odd.test", 80)


def test_a_hanging_async_resolver_is_cut_by_the_dns_timeout():
    async def hang(host: str, port: int) -> list[str]:
        await asyncio.sleep(30)
        return ["93.184.216.34"]

    guard = AddressGuard(resolver=hang, dns_timeout=0.2)
    started = time.monotonic()
    with pytest.raises(DnsFailure, match="timed out"):
        asyncio.run(guard.resolve("slow.test", 80))
    assert time.monotonic() - started < 1.0


def test_a_hanging_blocking_resolver_is_cut_by_the_dns_timeout():
    def hang(host: str, port: int) -> list[str]:
        time.sleep(0.6)
        return ["93.184.216.34"]

    guard = AddressGuard(resolver=hang, dns_timeout=0.1)
    started = time.monotonic()
    with pytest.raises(DnsFailure, match="timed out"):
        guard.resolve_sync("slow.test", 80)
    assert time.monotonic() - started < 0.4

    async def timed() -> float:
        started = time.monotonic()
        with pytest.raises(DnsFailure, match="timed out"):
            await guard.resolve("slow.test", 80)
        return time.monotonic() - started

    # (asyncio.run itself then waits for the sleeping worker thread to finish.)
    assert asyncio.run(timed()) < 0.4


def test_the_default_resolver_handles_numeric_hosts_without_dns():
    # No resolver injected: literal addresses are decided by AI_NUMERICHOST
    # parsing alone, so this never sends a DNS query.
    guard = AddressGuard()
    with pytest.raises(UnsafeAddress):
        guard.resolve_sync("2130706433", 80)
    with pytest.raises(UnsafeAddress):
        asyncio.run(guard.resolve("[::1]", 80))


def test_hung_lookups_on_the_crawl_loop_do_not_starve_the_others(monkeypatch):
    """The default resolver runs the C library's getaddrinfo on a pool of our own:
    on uvloop (the crawl loop) the loop's own getaddrinfo let two hung lookups
    block every other one in the process. The C library is stubbed here, so no
    query leaves the machine: hang*.test never answers, fast.test does."""
    import socket
    import threading

    from crawler import loop as crawl_loop
    from crawler import net

    release = threading.Event()
    real = socket.getaddrinfo
    threads: set[str] = set()

    def stub(host, port, *args, **kwargs):
        if kwargs.get("flags", 0) & socket.AI_NUMERICHOST:
            return real(host, port, *args, **kwargs)  # the literal-address check: no DNS
        if host.startswith("hang"):
            release.wait(10)
            raise socket.gaierror(socket.EAI_AGAIN, "stub: no answer")
        if host == "fast.test":
            threads.add(threading.current_thread().name)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", stub)
    guard = AddressGuard(dns_timeout=1.0)

    async def crawl() -> tuple[list, str, float]:
        hung = [asyncio.ensure_future(guard.resolve(f"hang{n}.test", 80)) for n in range(6)]
        await asyncio.sleep(0.05)  # the hung lookups hold their threads first
        started = time.monotonic()
        address = await guard.resolve("fast.test", 80)
        took = time.monotonic() - started
        outcomes = await asyncio.gather(*hung, return_exceptions=True)
        return outcomes, address, took

    try:
        outcomes, address, took = crawl_loop.run(crawl())
    finally:
        release.set()
    assert address == "93.184.216.34" and took < 0.5  # behind a hung lookup: its 1 s timeout
    assert all(isinstance(o, DnsFailure) and "timed out" in str(o) for o in outcomes)
    assert threads and all(name.startswith("crawl-dns") for name in threads)
    assert net.DNS_THREADS > 6


# -- pinning: connect only to the address that was checked --------------------------


def test_the_fetcher_dials_the_checked_address_and_keeps_the_host_name(server):
    stub = StubResolver({"site.test": [["127.0.0.1"]]})
    spy = SpyBackend()
    guard = AddressGuard(resolver=stub, allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(FAST, guard, network_backend=spy) as fetcher:
            return await fetcher.fetch(f"http://site.test:{server.port}/ok")

    result = asyncio.run(run())
    assert result.status == 200 and result.error is None
    assert spy.dialed == [("127.0.0.1", server.port)]
    assert stub.calls == ["site.test"]
    assert server.headers_of("/ok")[0]["host"] == f"site.test:{server.port}"


def test_dns_rebinding_cannot_move_a_checked_connection(server):
    # The first lookup says loopback (allowed for this test), the next one a
    # private address. Each connection is resolved once and dialled at that
    # answer, so the second fetch is refused rather than sent somewhere new.
    stub = StubResolver({"rebind.test": [["127.0.0.1"], ["10.0.0.7"]]})
    spy = SpyBackend()
    guard = AddressGuard(resolver=stub, allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(FAST, guard, network_backend=spy) as fetcher:
            first = await fetcher.fetch(f"http://rebind.test:{server.port}/ok")
            second = await fetcher.fetch(f"http://rebind.test:{server.port}/ok")
            return first, second

    first, second = asyncio.run(run())
    assert first.status == 200
    assert second.error is FetchError.SSRF_BLOCKED
    assert second.error_detail == "rebind.test resolves to a private address; refused to connect"
    assert spy.dialed == [("127.0.0.1", server.port)]
    assert stub.calls == ["rebind.test", "rebind.test"]
    assert server.requests["/ok"] == 1


def test_a_public_answer_at_check_time_is_what_gets_dialled():
    # Public first, loopback on any second lookup: the dial goes to the public
    # address (the spy refuses it without a socket) and nothing resolves again.
    stub = StubResolver({"flip.test": [["93.184.216.34"], ["127.0.0.1"]]})
    spy = SpyBackend()

    async def run():
        async with Fetcher(FAST, AddressGuard(resolver=stub), network_backend=spy) as fetcher:
            return await fetcher.fetch("http://flip.test/")

    result = asyncio.run(run())
    assert spy.dialed == [("93.184.216.34", 80)]
    assert stub.calls == ["flip.test"]
    assert result.error is FetchError.CONNECT_FAILED


def test_a_start_url_on_the_metadata_address_never_connects():
    spy = SpyBackend()
    stub = StubResolver({"metadata.test": [["169.254.169.254"]]})

    async def run():
        async with Fetcher(FAST, AddressGuard(resolver=stub), network_backend=spy) as fetcher:
            return [
                await fetcher.fetch("http://169.254.169.254/latest/meta-data/"),
                await fetcher.fetch("http://metadata.test/"),
            ]

    for result in asyncio.run(run()):
        assert result.error is FetchError.SSRF_BLOCKED
        assert "link-local" in result.error_detail
    assert spy.dialed == []


def test_proxy_environment_variables_are_ignored(server, monkeypatch):
    with HostileServer() as proxy:
        for name in (
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ):
            monkeypatch.setenv(name, proxy.origin)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

        async def run():
            async with Fetcher(FAST, guard, sleep=_no_sleep) as fetcher:
                return await fetcher.fetch(server.url("/ok"))

        result = asyncio.run(run())
        assert result.status == 200
        assert server.requests["/ok"] == 1
        assert proxy.connections == 0


def test_guarded_streams_count_what_they_receive_and_report_a_silent_hang_up():
    guard = AddressGuard(resolver=StubResolver({"site.test": [["93.184.216.34"]]}))
    answer = [b"HTTP/1.1 200 OK\r\n", b"Content-Length: 0\r\n\r\n"]

    async def run():
        backend = GuardedBackend(guard, httpcore.AsyncMockBackend(answer))
        stream = await backend.connect_tcp("site.test", 80)
        await stream.write(b"GET / HTTP/1.1\r\nHost: site.test\r\n\r\n")
        received = [await stream.read(65536) for _ in range(2)]
        counted_after_answer = stream.bytes_read
        assert await stream.read(65536) == b"" and stream.at_eof  # a close after the answer
        await stream.write(b"GET /again HTTP/1.1\r\nHost: site.test\r\n\r\n")
        with pytest.raises(httpcore.ReadError, match="without answering"):
            await stream.read(65536)  # a close with no byte of an answer
        return received, counted_after_answer

    received, counted = asyncio.run(run())
    assert received == [b"HTTP/1.1 200 OK\r\n", b"Content-Length: 0\r\n\r\n"]
    assert counted == sum(map(len, received))

"""The SSRF guard: resolve a host once, refuse non-public addresses, dial only that one.

Four pieces:

* ``classify`` names why an address is not public, from an explicit table.
  ``ipaddress.is_global`` alone is not enough: on Python 3.11 it calls
  multicast, NAT64, 6to4 and IPv4-compatible forms of 127.0.0.1 global, and
  its answers have changed between security releases (CVE-2024-4032).
  Addresses that embed an IPv4 address are unwrapped and the IPv4 judged.
  The cloud metadata endpoints (``METADATA_ADDRESSES``) are refused by
  ``AddressGuard.check`` before anything can allow them, in every form.
* ``AddressGuard.resolve_all`` turns a host into the checked addresses to dial,
  in turn (``dial_order``: at most four, the families alternating after the first).
  Numeric spellings (``2130706433``, ``0x7f.1``, ``127.1``) are parsed the way
  the C library parses them, so the check sees the address the socket would.
  If any answer is refused the whole answer is, since a mixed answer is how
  DNS rebinding picks which address a later lookup returns.
* ``GuardedBackend`` is the network backend (httpcore's interface) the
  fetcher's httpcore connection pools dial through: its ``connect_tcp`` asks
  the guard and dials the returned IPs until one connects. Nothing else ever resolves a name, and
  TLS still verifies the certificate against the host name, which httpcore
  passes separately to ``start_tls`` as ``server_hostname``. Each stream it
  returns is a ``CountingStream``, which counts the bytes received so the
  fetcher's body caps see the wire, chunk framing included.
* ``LookupLane`` gives a class of lookups (an audit's external links) slots
  and threads of their own, so however slow they are, the audited site's
  lookups never wait behind them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
import ipaddress
import itertools
import os
import re
import select
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore

from .errors import DnsFailure, DnsTemporaryFailure, UnsafeAddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], "list[str] | Awaitable[list[str]]"]

DNS_TIMEOUT = 5.0

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# Checked in order; the first match names the reason. Sources: the IANA IPv4
# and IPv6 special-purpose address registries (RFC 6890 and successors).
_IPV4_BLOCKS: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("168.63.129.16/32"), "cloud-metadata"),  # Azure's WireServer, in a public block
    (_V4("255.255.255.255/32"), "broadcast"),
    (_V4("0.0.0.0/8"), "unspecified"),  # "this network": Linux dials it as localhost
    (_V4("10.0.0.0/8"), "private"),
    (_V4("100.64.0.0/10"), "cgnat"),  # includes Alibaba Cloud's metadata address
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link-local"),  # includes the cloud metadata address
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.0.0.0/24"), "reserved"),  # IETF protocol assignments
    (_V4("192.0.2.0/24"), "documentation"),
    (_V4("192.88.99.0/24"), "reserved"),  # deprecated 6to4 relay anycast
    (_V4("192.168.0.0/16"), "private"),
    (_V4("198.18.0.0/15"), "benchmarking"),
    (_V4("198.51.100.0/24"), "documentation"),
    (_V4("203.0.113.0/24"), "documentation"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("240.0.0.0/4"), "reserved"),
)

_IPV6_BLOCKS: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("64:ff9b::/96"), "nat64"),
    (_V6("64:ff9b:1::/48"), "nat64"),
    (_V6("100::/64"), "reserved"),  # discard-only
    (_V6("2001::/32"), "teredo"),
    (_V6("2001:2::/48"), "benchmarking"),
    (_V6("2001:db8::/32"), "documentation"),
    (_V6("2001::/23"), "reserved"),  # IETF protocol assignments (ORCHID and others)
    (_V6("3fff::/20"), "documentation"),
    (_V6("fd00:ec2::254/128"), "cloud-metadata"),  # AWS's over IPv6, inside fc00::/7
    (_V6("fc00::/7"), "private"),  # unique local addresses, IPv6's private range
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "site-local"),
    (_V6("ff00::/8"), "multicast"),
)

# Only 2000::/3 is allocated as global unicast; anything else is not a website.
_IPV6_GLOBAL_UNICAST = _V6("2000::/3")
_IPV4_MAPPED = _V6("::ffff:0:0/96")
_IPV4_COMPATIBLE = _V6("::/96")
_SIX_TO_FOUR = _V6("2002::/16")
_NAT64 = _V6("64:ff9b::/96")

# Where a cloud VM fetches its credentials: AWS, GCP, Azure and most others
# (169.254.169.254), AWS over IPv6 (fd00:ec2::254), Alibaba Cloud
# (100.100.100.200), Azure's WireServer (168.63.129.16). Never a crawl target,
# whatever ``allow_private`` or ``allowed_targets`` say, and recognised inside
# the IPv6 forms that carry an IPv4 address (``embedded_ipv4``).
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)

# What ``allow_private`` unlocks: the ranges someone's own staging or local
# site lives on. Link-local stays refused because it holds cloud metadata, and
# the metadata addresses are refused in ``AddressGuard.check`` whatever this says.
PRIVATE_REASONS = frozenset({"private", "loopback"})


def classify(ip: IPAddress) -> str | None:
    """``None`` if ``ip`` is a public unicast address, else why it is not."""
    if isinstance(ip, ipaddress.IPv4Address):
        for network, reason in _IPV4_BLOCKS:
            if ip in network:
                return reason
        # Belt and braces: anything the table missed that Python still
        # considers non-global (a registry update, say) is refused too.
        return None if ip.is_global else "reserved"

    ip = ipaddress.IPv6Address(ip.packed)  # drop any %scope; it does not change the class
    if ip in _IPV4_MAPPED:
        return "ipv4-mapped" if classify(ipaddress.IPv4Address(ip.packed[12:])) else None
    for network, reason in _IPV6_BLOCKS[:2]:
        if ip in network:
            return reason
    if ip in _IPV4_COMPATIBLE:
        return "ipv4-compatible" if classify(ipaddress.IPv4Address(ip.packed[12:])) else None
    if ip in _SIX_TO_FOUR:
        # 2002:AABB:CCDD::/48 routes to the IPv4 address AA.BB.CC.DD.
        return "6to4" if classify(ipaddress.IPv4Address(ip.packed[2:6])) else None
    for network, reason in _IPV6_BLOCKS[2:]:
        if ip in network:
            return reason
    if ip not in _IPV6_GLOBAL_UNICAST:
        return "reserved"
    return None


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, if it is of a form that carries one:
    IPv4-mapped, IPv4-compatible, 6to4 or NAT64's well-known prefix."""
    packed = ip.packed
    if ip in _IPV4_MAPPED or ip in _IPV4_COMPATIBLE or ip in _NAT64:
        return ipaddress.IPv4Address(packed[12:])
    if ip in _SIX_TO_FOUR:
        return ipaddress.IPv4Address(packed[2:6])
    return None


def is_metadata_address(ip: IPAddress) -> bool:
    """Whether ``ip`` is a cloud metadata endpoint, also wrapped in an IPv6 form."""
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ipaddress.IPv6Address(ip.packed)  # a %scope must not hide it
        inner = embedded_ipv4(ip)
        if inner is not None and inner in METADATA_ADDRESSES:
            return True
    return ip in METADATA_ADDRESSES


def parse_numeric_host(host: str) -> IPAddress | None:
    """The address a numeric host means to the C library, or ``None`` for a name.

    ``getaddrinfo`` with ``AI_NUMERICHOST`` never touches DNS and accepts the
    inet_aton spellings (``2130706433``, ``0x7f.1``, ``127.1``, ``0177.0.0.1``)
    that ``ipaddress`` rejects, which is exactly why the check must use it.
    """
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(literal)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(
            literal, None, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
        )
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    return ipaddress.ip_address(infos[0][4][0])


def _is_localhost_name(host: str) -> bool:
    # RFC 6761: "localhost" and every name under it mean loopback, whatever DNS says.
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost")


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


# resolve_sync needs a thread to put a timeout on a blocking getaddrinfo; a
# small shared pool bounds how many hung lookups can pile up.
_SYNC_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="dns")

# Crawl lookups run on a pool of our own, not the loop's getaddrinfo: uvloop
# hands that to libuv's shared pool, where at most two lookups run at once, so
# two names whose nameservers never answer made every other lookup in the
# process time out (asyncio's default pool allowed CPU count + 4). A lookup the
# DNS timeout gave up on still holds its thread until the C library returns;
# this many of them can hang before the rest wait.
DNS_THREADS = 32
# Lookups in a LookupLane (an audit's external links) run on threads of their
# own: however many of them hang, the site's lookups keep the pool above.
LANE_DNS_THREADS = 8
_pools: dict[str, tuple[int, concurrent.futures.ThreadPoolExecutor]] = {}


def _dns_pool(name: str = "crawl", threads: int = DNS_THREADS) -> concurrent.futures.ThreadPoolExecutor:
    """The process's lookup pool ``name``, made anew in a forked child (threads do not survive fork)."""
    held = _pools.get(name)
    if held is None or held[0] != os.getpid():
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"{name}-dns")
        held = _pools[name] = (os.getpid(), pool)
    return held[1]


class LookupLane:
    """Lookups with a concurrency of their own: LANE_DNS_THREADS at once, on as many threads of their own.

    An audit's external links resolve through one (``AddressGuard.in_lane``),
    so nameservers that take the whole DNS timeout to fail hold at most these
    slots and threads, never the ones the audited site's connections resolve
    on. One per crawl loop: its semaphore belongs to the loop that first waits on it.
    """

    def __init__(self) -> None:
        self.slots = asyncio.Semaphore(LANE_DNS_THREADS)


class AddressGuard:
    """Resolves hosts and refuses any answer that is not entirely public.

    ``allow_private`` allows private and loopback addresses (auditing one's own
    staging or local site). ``allowed_targets`` allows exact ``(ip, port)``
    pairs whatever their class, so tests can reach one loopback server and
    nothing else. ``resolver(host, port)`` returns IP strings (sync or async);
    the default is the system's ``getaddrinfo``.
    """

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        allowed_targets: Iterable[tuple[str, int]] = (),
        dns_timeout: float = DNS_TIMEOUT,
    ) -> None:
        self.allow_private = allow_private
        self._resolver = resolver
        self._allowed = frozenset(
            (str(ipaddress.ip_address(ip)), int(port)) for ip, port in allowed_targets
        )
        # (host name, port) pairs whose private addresses are allowed, by name (private_only_for): any
        # other name that resolves to the same address (a rebinding name, a neighbour on one ingress) is not.
        self._private_hosts: frozenset[tuple[str, int]] = frozenset()
        self.dns_timeout = dns_timeout
        self._lane: LookupLane | None = None

    def private_only_for(self, host: str, port: int) -> AddressGuard:
        """The same guard, allowing private addresses for ``host``:``port`` alone (by name, not by address)."""
        twin = copy.copy(self)
        twin.allow_private = False
        twin._private_hosts = frozenset({(host.rstrip(".").lower(), int(port))})
        return twin

    def in_lane(self, lane: LookupLane) -> AddressGuard:
        """The same guard, with its lookups going through ``lane``."""
        twin = copy.copy(self)
        twin._lane = lane
        return twin

    async def resolve(self, host: str, port: int) -> str:
        """The first checked IP to connect to; raises UnsafeAddress or DnsFailure."""
        return (await self.resolve_all(host, port))[0]

    async def resolve_all(self, host: str, port: int) -> list[str]:
        """The checked IPs to try in turn (``dial_order``); raises UnsafeAddress or DnsFailure."""
        early = self._precheck(host, port)
        if early is not None:
            return [early]
        if self._lane is None:
            return await self._timed_lookup(host, port)
        # The wait for a slot is not part of the DNS timeout (a lookup queued
        # behind slow ones would fail without asking anyone). It is bounded:
        # a slot is held a DNS timeout at most, and the fetcher's deadline
        # covers the whole connect.
        async with self._lane.slots:
            return await self._timed_lookup(host, port)

    async def _timed_lookup(self, host: str, port: int) -> list[str]:
        try:
            async with asyncio.timeout(self.dns_timeout):
                answers = await self._lookup(host, port)
        except TimeoutError:
            raise DnsTemporaryFailure(f"DNS lookup for {host} timed out") from None
        return self._checked(host, port, answers)

    def resolve_sync(self, host: str, port: int) -> str:
        """Same as ``resolve``, blocking (for form validation outside an event loop)."""
        early = self._precheck(host, port)
        if early is not None:
            return early
        resolver = self._resolver or _system_resolver
        if inspect.iscoroutinefunction(resolver):
            raise TypeError("resolve_sync needs a synchronous resolver")
        future = _SYNC_POOL.submit(resolver, host, port)
        try:
            answers = future.result(timeout=self.dns_timeout)
        except concurrent.futures.TimeoutError:
            raise DnsTemporaryFailure(f"DNS lookup for {host} timed out") from None
        except (OSError, UnicodeError) as exc:
            raise _dns_failure(host, exc) from None
        return self._checked(host, port, answers)[0]

    def check(self, ip: IPAddress, port: int, host: str = "") -> None:
        """Raise UnsafeAddress unless connecting to ``ip:port`` (for ``host``) is allowed."""
        reason = classify(ip)
        if is_metadata_address(ip):
            # Before the allowances: neither allow_private nor an allowed
            # target may ever reach a cloud's credentials. The table's own
            # reason (link-local, cgnat, ipv4-mapped...) is kept where it has one.
            if reason is None or reason in PRIVATE_REASONS:
                reason = "cloud-metadata"
        elif reason is None or (str(ip), port) in self._allowed:
            return
        elif reason in PRIVATE_REASONS and (
                self.allow_private or (host.strip("[]").rstrip(".").lower(), port) in self._private_hosts):
            return
        raise UnsafeAddress(
            f"{ip} is a {reason} address; refused to connect",
            address=str(ip),
            reason=reason,
        )

    def _precheck(self, host: str, port: int) -> str | None:
        """Decide literal addresses and localhost names without any lookup."""
        if not host:
            raise DnsFailure("The URL has no host name")
        ip = parse_numeric_host(host)
        if ip is not None:
            self.check(ip, port, host)
            return _dial_string(ip)
        if ":" in host or "%" in host:
            # Not a valid IPv6 literal, and certainly not a name worth asking DNS.
            raise DnsFailure(f"{host!r} is not a valid host")
        if _is_localhost_name(host):
            loopback = ipaddress.IPv4Address("127.0.0.1")
            self.check(loopback, port, host)
            return str(loopback)
        return None

    async def _lookup(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        lane_pool = _dns_pool("lane", LANE_DNS_THREADS) if self._lane is not None else None
        try:
            if self._resolver is None:
                return await loop.run_in_executor(lane_pool or _dns_pool(), _system_resolver, host, port)
            if inspect.iscoroutinefunction(self._resolver):
                return list(await self._resolver(host, port))
            if lane_pool is not None:
                return list(await loop.run_in_executor(lane_pool, self._resolver, host, port))
            answer: Any = await asyncio.to_thread(self._resolver, host, port)
            return list(answer)
        except (OSError, UnicodeError) as exc:
            raise _dns_failure(host, exc) from None

    def _checked(self, host: str, port: int, answers: Iterable[str]) -> list[str]:
        addresses: list[IPAddress] = []
        for answer in answers:
            try:
                ip = ipaddress.ip_address(answer)
            except ValueError:
                raise DnsFailure(f"DNS for {host} returned {answer!r}, not an address") from None
            if ip not in addresses:
                addresses.append(ip)
        if not addresses:
            raise DnsFailure(f"{host} has no address")
        for ip in addresses:
            try:
                self.check(ip, port, host)
            except UnsafeAddress as exc:
                raise UnsafeAddress(
                    f"{host} resolves to a {exc.reason} address; refused to connect",
                    address=exc.address,
                    reason=exc.reason,
                ) from None
        return [_dial_string(ip) for ip in dial_order(addresses)]


# Addresses tried for one connection: a host whose first answer is dead (an IPv6
# address on a network without IPv6 routing) is reached on the next, as browsers do.
DIAL_ADDRESSES = 4


def dial_order(addresses: list[IPAddress]) -> list[IPAddress]:
    """RFC 8305's order: the resolver's first address, then the families taking turns, at most DIAL_ADDRESSES."""
    first = [ip for ip in addresses if ip.version == addresses[0].version]
    other = [ip for ip in addresses if ip.version != addresses[0].version]
    turns = [ip for pair in itertools.zip_longest(first, other) for ip in pair if ip is not None]
    return turns[:DIAL_ADDRESSES]


def _dial_string(ip: IPAddress) -> str:
    # Without the scope a link-local address could not be dialled, but those
    # are refused anyway unless explicitly allowed; keep the plain form.
    return str(ipaddress.ip_address(ip.packed))


def _dns_failure(host: str, exc: BaseException) -> DnsFailure:
    errno = exc.errno if isinstance(exc, socket.gaierror) else None
    if errno in (socket.EAI_NONAME, socket.EAI_NODATA):
        return DnsFailure(f"{host} does not exist (NXDOMAIN)")
    kind = DnsTemporaryFailure if errno == socket.EAI_AGAIN else DnsFailure
    return kind(f"DNS lookup for {host} failed: {exc}")


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that dials only addresses the guard approved.

    The pool hands ``connect_tcp`` the URL's host; the guard resolves it once
    and the inner backend dials the checked IP, so there is no second lookup
    for a rebinding DNS server to answer differently. The inner backend is
    httpcore's ``AnyIOBackend`` unless a test passes a spy.
    """

    def __init__(
        self, guard: AddressGuard, inner: httpcore.AsyncNetworkBackend | None = None
    ) -> None:
        self.guard = guard
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        *others, last = await self.guard.resolve_all(host, port)

        async def dial(ip: str) -> httpcore.AsyncNetworkStream:
            return await self.inner.connect_tcp(
                ip, port, timeout=timeout, local_address=local_address, socket_options=socket_options)

        for ip in others:
            try:
                return CountingStream(await dial(ip))
            except (httpcore.ConnectError, httpcore.ConnectTimeout):
                continue  # the next address; the fetch's deadline bounds them all
        return CountingStream(await dial(last))

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise UnsafeAddress("Unix sockets are never used for crawling")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def _readable(sock: socket.socket | None) -> bool:
    """Whether a read on ``sock`` would return at once: data waiting, or the peer's close."""
    if sock is None or sock.fileno() < 0:
        return True
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([sock], [], [], 0)[0])
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


# h11 ends a head at a blank line, with or without its CR; heads past the
# window are not looked for (h11 refuses them well before 64 KiB anyway).
_HEAD_END = re.compile(rb"\n\r?\n")
_HEAD_WINDOW = 64 * 1024
_LAST_BYTES = 8
_INTERIM = re.compile(rb"HTTP/\d(?:\.\d)? 1\d\d")


class CountingStream(httpcore.AsyncNetworkStream):
    """A connection's stream that counts what it receives.

    httpcore hands the stream to the fetcher as a response's
    ``network_stream`` extension; ``bytes_read`` is what the body caps
    compare, since a chunked body's framing costs as much to receive as its
    data, and ``at_eof`` says the server closed the connection.

    An end of stream with no byte since the request was written raises
    ``httpcore.ReadError``: that server closed the connection without
    answering (worth a retry), which is otherwise told apart from a malformed
    answer (not retried) only by the wording of httpcore's error.
    """

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self.inner = inner
        self.bytes_read = 0
        self.at_eof = False
        self.closed = False
        self._awaiting_answer = False
        self._socket: socket.socket | None = None
        # What the current answer's first bytes were, to find where its head
        # ends: h11 does not say how many bytes the head took.
        self._request_start = 0
        self._head = bytearray()
        self._last = b""  # the last bytes received, to tell a stray line break after a body

    def overrun(self, body_length: int) -> tuple[bool, int]:
        """After an answer of ``body_length`` body bytes: whether its connection
        must close, and the surplus to report.

        It closes when more than the head and the body arrived since the
        request was written (on a reused connection the surplus would be read
        as the next request's answer), or when the head is not found (too
        long, or behind a 1xx): closing only costs a connect. The surplus is
        what a Content-Length too small for its body leaves past a final
        answer; 0 when none, behind a 1xx head, or only a stray line break,
        which some servers send after a body.
        """
        end = _HEAD_END.search(self._head)
        if end is None:
            return True, 0
        extra = self.bytes_read - self._request_start - end.end() - body_length
        if extra <= 0:
            return False, 0
        if _INTERIM.match(self._head) or (extra <= len(self._last) and not self._last[-extra:].strip(b"\r\n")):
            return True, 0
        return True, extra

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = await self.inner.read(max_bytes, timeout)
        if data:
            self.bytes_read += len(data)
            self._awaiting_answer = False
            if len(self._head) < _HEAD_WINDOW:
                self._head += data[: _HEAD_WINDOW - len(self._head)]
            self._last = (self._last + data[-_LAST_BYTES:])[-_LAST_BYTES:]
        else:
            self.at_eof = True
            if self._awaiting_answer:
                raise httpcore.ReadError("The server closed the connection without answering")
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._awaiting_answer = True
        self._request_start = self.bytes_read
        self._head.clear()
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        self.closed = True
        await self.inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        tls = await self.inner.start_tls(ssl_context, server_hostname, timeout)
        return CountingStream(tls)

    def get_extra_info(self, info: str) -> Any:
        # httpcore asks "is_readable" of every idle connection for every request it
        # pools; answered from the raw socket kept here, as httpcore's own backend
        # does, instead of looking the socket up through anyio each time.
        if info == "is_readable":
            if self.closed:
                return True  # httpcore drops a pooled connection that reads as readable
            if self._socket is None:
                self._socket = self.inner.get_extra_info("socket")
            return _readable(self._socket)
        return self.inner.get_extra_info(info)

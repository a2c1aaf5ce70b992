"""Fetching one URL safely: deadlines, byte caps, bounded decompression,
hop-by-hop redirects through the SSRF guard, and polite retries.

``Fetcher.fetch`` never raises for anything a site does; every failure comes
back as ``FetchResult(error=FetchError.X, error_detail="...")``. The pieces:

* Connections. Requests go through httpcore's ``AsyncConnectionPool`` (HTTP/1.1,
  keep-alive), a few small pools per Fetcher with each request sent through the
  least busy one. At most ``concurrency`` requests are in flight; one beyond
  that waits for a slot before its deadline starts, so it spends the deadline
  on the site, not in a queue.
* Every pool dials through ``net.GuardedBackend`` (resolve once, check,
  connect to that IP; TLS still verifies the host name). httpcore reads no
  proxy variables, and nothing resolves a name twice.
* httpcore's read timeout is per socket read, so a server dripping a byte at
  a time never trips it; each exchange runs under ``asyncio.timeout``.
* Bodies are read raw (httpcore undoes the chunking, not the
  Content-Encoding) and inflated by ``body``, in steps, with
  ``decompressobj().decompress(data, max_length)``, as Scrapy does since
  CVE-2025-6176: inflating a whole chunk in one call, as httpx does, turns a
  200 KB gzip bomb into one 67 MB chunk. Only gzip and deflate are advertised.
  The wire cap counts what the connection received (``net.CountingStream``),
  so chunk framing cannot smuggle unbounded bytes past it.
* Failures are translated by exception type and by where they happened
  (before the response head, or while reading the body): ``transport_errors``.
* Whether an answer is final or worth another try (Retry-After, backoff with
  jitter) is ``retry``'s decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import random
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import BinaryIO

import httpcore
import httpx

from .body import HEADERS_ONLY, UNLABELLED, BodyPlan, read_body
from .credentials import Credentials
from .errors import (
    CrawlError,
    DeadlineExceeded,
    InvalidURLError,
    RateLimited,
    RedirectBlockedScheme,
    RedirectLoop,
    TooManyRedirects,
)
from .hop_cookies import through_redirect
from .net import AddressGuard, GuardedBackend
from .overrun import drain
from .request_url import basic_auth, origin, parse_url, scheme_of, strip
from .response_head import content_length, header_text, parse_content_type
from .retry import FINAL, Plan, RetryPlanner
from .transport_errors import HTTPCORE_ERRORS, translate
from .types import FetchError, FetchResult, Hop

MiB = 1024 * 1024

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
ACCEPT_ENCODING = "gzip, deflate"
ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"

_MAX_DETAIL = 300
# Connections per httpcore pool. A pool looks at all its connections for every
# request, so its CPU per request grows with its size; pools of four, each
# request sent to the least busy, cost as little as smaller ones and a third of
# one big pool (benchmarks/RESULTS-http.md).
POOL_CONNECTIONS = 4
# Each connection's kernel receive buffer. anyio on uvloop moves all that the
# kernel holds into Python at each wake-up (megabytes on a fast link), so the
# buffer is what bounds a connection's memory besides the body caps.
_RECEIVE_BUFFER = 256 * 1024


@dataclass(frozen=True)
class FetchPolicy:
    """Limits for one crawl's fetches (timeouts in seconds, sizes in bytes)."""

    user_agent: str = "SitewardBot/0.1 (+self-hosted site audit)"
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    deadline: float = 30.0  # one request and its whole body
    max_body_bytes: int = 5 * MiB  # on the wire
    max_decoded_bytes: int = 10 * MiB
    max_redirects: int = 10
    max_retries: int = 2
    retry_statuses: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504})
    # Retry-After on a 429 or 503. A wait up to retry_after_cap is slept inside
    # the fetch (only this URL's window slot waits). A longer one, up to
    # reschedule_cap, ends the fetch at once as RATE_LIMITED with the wait in
    # FetchResult.retry_after, for a caller that can come back to the URL later
    # (the audit puts it back in its frontier); sleeping it here would hold the
    # whole chunk open. 0 means the caller cannot, so a longer wait gives up.
    retry_after_cap: float = 30.0
    reschedule_cap: float = 0.0
    # A 429 or 503 still answered with a Retry-After after every retry: a rescheduling
    # caller waits at least this long before the next try, however short the wait
    # asked. A 429 that never said when is given up instead (retry.py).
    rate_limited_pause: float = 60.0
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    # Everything one fetch() may take: all hops, retries and waits. Without it
    # a chain of ten slow redirects could hold a worker for ten deadlines.
    total_budget: float = 60.0


@dataclass
class _Response:
    """What one HTTP exchange produced (internal; becomes a FetchResult)."""

    url: str
    status: int
    headers: dict[str, str]
    content_type: str
    charset: str | None
    ttfb: float
    plan: Plan
    body: bytes | None = None
    size: int = 0
    error: CrawlError | None = None
    detail: str = ""
    binary: bool = False
    set_cookies: tuple[str, ...] = ()


@dataclass
class _Trail:
    """What a fetch has done so far, for building its result at any point."""

    url: str
    method: str
    started: float
    hops: list[Hop] = field(default_factory=list)
    attempts: int = 0
    cookies: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # FetchResult.redirect_cookies


class Fetcher:
    """One per crawl. Use ``async with Fetcher(...) as f`` or call ``aclose()``.

    ``verify`` is passed to TLS as httpx takes it: ``True`` (the default)
    verifies against certifi's CAs, an ``ssl.SSLContext`` can trust a private
    CA. ``False`` turns verification off and exists only for someone auditing
    their own staging site; nothing in the crawler sets it by itself.
    ``network_backend`` is the httpcore backend below the SSRF guard; tests
    pass a spy that records the addresses dialled. ``sleep`` and ``clock``
    (wall-clock seconds, what an HTTP-date Retry-After is measured from) are
    injectable so tests of waiting never wait. ``credentials`` (a private
    site's headers) go on every hop to their own origin and no other; a login
    replaces them when its session cookies change, and a redirect there setting
    cookies passes them to the fetch's next hops (``hop_cookies``). A redirect to a URL ``avoid`` names (a logout,
    a path robots.txt disallows; callers may swap it between fetches) is not followed: the redirect is the answer.
    """

    def __init__(
        self,
        policy: FetchPolicy,
        guard: AddressGuard,
        *,
        concurrency: int = 16,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        verify: ssl.SSLContext | bool = True,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
        credentials: Credentials | None = None,
        avoid: Callable[[str], bool] | None = None,
    ) -> None:
        self.policy = policy
        self.credentials, self.avoid = credentials, avoid
        self.guard = guard
        self._sleep = sleep
        self._retry = RetryPlanner(policy, clock, random.Random())
        concurrency = max(1, concurrency)
        ssl_context = verify if isinstance(verify, ssl.SSLContext) else default_ssl_context(verify)
        backend = GuardedBackend(guard, network_backend)
        # Redirects, retries, credentials and headers are all handled here, so
        # the pools only send one request at a time on a connection. Together
        # they hold a connection for every slot, so no request ever waits
        # inside a pool.
        per_pool = min(POOL_CONNECTIONS, concurrency)
        self._pools = [
            httpcore.AsyncConnectionPool(
                ssl_context=ssl_context,
                max_connections=per_pool,
                max_keepalive_connections=per_pool,
                keepalive_expiry=5.0,
                http1=True,
                http2=False,
                network_backend=backend,
                socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER)],
            )
            for _ in range(math.ceil(concurrency / per_pool))
        ]
        self._busy = [0] * len(self._pools)
        self._headers = [
            (b"User-Agent", policy.user_agent.encode()),
            (b"Accept", ACCEPT.encode()),
            (b"Accept-Encoding", ACCEPT_ENCODING.encode()),
        ]
        self._timeouts = {
            "connect": policy.connect_timeout,
            "read": policy.read_timeout,
            "write": policy.read_timeout,
            "pool": None,
        }
        self._slots = asyncio.Semaphore(concurrency)

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()

    async def fetch(
        self, url: str, *, keep_body: bool | None = None, max_bytes: int | None = None,
        headers: list[tuple[bytes, bytes]] = (), into: BinaryIO | None = None, max_redirects: int | None = None,
    ) -> FetchResult:
        """GET ``url`` following redirects hop by hop; never raises for site faults.

        ``keep_body``: ``None`` keeps HTML bodies only, ``True`` always (a body cut
        at a cap is kept as a prefix beside BODY_TOO_LARGE / DECOMPRESSION_LIMIT,
        which robots.txt needs), ``False`` never. ``max_bytes`` replaces both
        caps. ``headers`` go on the first hop only: a conditional request's
        validators are ``url``'s, not its redirect target's. ``into``: a 2xx final
        answer's body, any type, is written to this file (emptied as each read of
        it starts) instead of ``body``, so a 50 MiB sitemap is not held in memory;
        whole or not at all (one declared or grown past the cap is BODY_TOO_LARGE),
        and an error's body is never read into it; read it only on a 2xx.
        ``max_redirects`` lowers the policy's (robots.txt follows five).
        """
        body = BodyPlan(True if into is not None else keep_body, max_bytes, into)
        return await self._guarded("GET", url, body, headers, max_redirects=max_redirects)

    async def check(self, url: str) -> FetchResult:
        """Check an external link: HEAD, then GET (body not read) when HEAD is refused; one budget for both."""
        started = time.monotonic()
        head = await self._guarded("HEAD", url, HEADERS_ONLY, started=started)
        if head.status in (405, 501) or head.error is FetchError.PROTOCOL_ERROR:
            get = await self._guarded("GET", url, HEADERS_ONLY, started=started)
            return _declared_size(replace(get, attempts=head.attempts + get.attempts))
        return _declared_size(head)

    async def send(
        self, method: str, url: str, *, headers: list[tuple[bytes, bytes]] = (), form: bytes | None = None
    ) -> FetchResult:
        """One request, its redirect not followed and never retried: a login's steps.

        A login posts a form (``form``, urlencoded) and must see every hop's
        cookies, so it walks its redirects itself; a retried POST could log in twice.
        """
        trail = _Trail(url=url, method=method, started=time.monotonic(), attempts=1)
        try:
            target = strip(parse_url(url))
            extra = [*(self.credentials.for_url(target) if self.credentials else ()), *headers]
            if form is not None:
                extra += [(b"Content-Type", b"application/x-www-form-urlencoded"),
                          (b"Content-Length", str(len(form)).encode())]
            response = await self._exchange(method, target, extra, BodyPlan(), self.policy.deadline,
                                            lambda status, head: FINAL, content=form)
        except CrawlError as exc:
            return self._failed(trail, url, exc)
        return self._finished(trail, response)

    async def _guarded(self, method: str, url: str, body: BodyPlan,
                       first_hop: list[tuple[bytes, bytes]] = (), started: float | None = None,
                       max_redirects: int | None = None) -> FetchResult:
        trail = _Trail(url=url, method=method, started=time.monotonic() if started is None else started)
        try:
            return await self._run(trail, body, first_hop, max_redirects)
        except CrawlError as exc:
            return self._failed(trail, url, exc)
        except Exception as exc:  # noqa: BLE001 - the promise is "never raises"
            # Reaching here is a bug in this module, but one page must not
            # end a crawl; the type and message are kept for the report.
            detail = f"{type(exc).__name__}: {exc}"
            return self._failed(trail, url, CrawlError(detail))

    async def _run(self, trail: _Trail, body: BodyPlan, first_hop: list[tuple[bytes, bytes]] = (),
                   max_redirects: int | None = None) -> FetchResult:
        policy = self.policy
        if max_redirects is None or max_redirects > policy.max_redirects:
            max_redirects = policy.max_redirects
        budget_end = trail.started + policy.total_budget
        target = parse_url(trail.url)
        credentials = basic_auth(target)
        cred_origin = origin(target)
        target = strip(target)
        method = trail.method
        seen = {str(target)}
        session = self.credentials  # with the cookies this fetch's redirects set, for its next hops
        for hop in range(max_redirects + 1):
            # Credentials from the start URL go only to the origin they came with.
            home = credentials and origin(target) == cred_origin
            headers = [(b"Authorization", credentials.encode())] if home else []
            if session is not None:
                headers += session.for_url(target)
            if hop == 0:
                headers += first_hop
            response = await self._with_retries(
                method, target, headers, body, budget_end, trail
            )
            location = response.headers.get("location") if response.status in REDIRECT_STATUSES else None
            if location is None or response.error is not None:
                return self._finished(trail, response)
            location = location.strip()
            scheme = scheme_of(location)
            if scheme not in ("", "http", "https"):
                # Decided on the raw header: file:, data: and javascript: URLs
                # need not even parse for us to refuse them.
                trail.hops.append(Hop(str(target), response.status, location[:2048], response.ttfb))
                blocked = RedirectBlockedScheme(f"Redirect to a {scheme}: URL was not followed")
                return self._finished(trail, response, blocked)
            try:
                next_url = target.join(location)
            except (httpx.InvalidURL, UnicodeError, ValueError):
                trail.hops.append(Hop(str(target), response.status, location[:2048], response.ttfb))
                invalid = InvalidURLError(f"Redirect to an invalid URL: {location[:200]!r}")
                return self._finished(trail, response, invalid)
            # Userinfo never goes on the wire in the URL: the Authorization
            # header above is the only way credentials travel, and only home.
            next_url = strip(next_url)
            trail.hops.append(Hop(str(target), response.status, str(next_url), response.ttfb))
            if self.avoid is not None and self.avoid(str(next_url)):  # unfetched, but where it points
                through_redirect(trail.cookies, session, target, response.set_cookies)  # set by the redirect
                return replace(self._finished(trail, response), final_url=str(next_url), set_cookies=())
            if str(next_url) in seen:
                return self._finished(
                    trail, response, RedirectLoop(f"Redirect loop back to {next_url}")
                )
            if hop == max_redirects:
                return self._finished(
                    trail, response, TooManyRedirects(f"More than {max_redirects} redirects")
                )
            session = through_redirect(trail.cookies, session, target, response.set_cookies)
            seen.add(str(next_url))
            target = next_url
        raise AssertionError("unreachable: the loop returns on its last hop")

    async def _with_retries(
        self,
        method: str,
        url: httpx.URL,
        headers: list[tuple[bytes, bytes]],
        body: BodyPlan,
        budget_end: float,
        trail: _Trail,
    ) -> _Response:
        """One hop: the request and its retries. Raises CrawlError when no response came."""
        policy = self.policy
        for attempt in range(policy.max_retries + 1):
            remaining = budget_end - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceeded(f"The fetch used its whole {policy.total_budget:g} s budget")
            last = attempt == policy.max_retries
            trail.attempts += 1

            def plan(
                status: int, headers: dict[str, str], attempt: int = attempt, last: bool = last
            ) -> Plan:
                return self._retry.plan(status, headers, attempt, last, budget_end)

            try:
                response = await self._exchange(
                    method,
                    url,
                    headers,
                    body,
                    min(policy.deadline, remaining),
                    plan,
                )
            except CrawlError as exc:
                if not exc.retryable or last:
                    raise
                delay = self._retry.backoff(attempt)
                if time.monotonic() + delay >= budget_end:
                    raise
                await self._sleep(delay)
                continue
            if response.error is not None and response.error.retryable and not last:
                # A retry that could not fit the budget would end as DeadlineExceeded and lose this answer.
                delay = self._retry.backoff(attempt)
                if time.monotonic() + delay >= budget_end:
                    return response
                await self._sleep(delay)
                continue
            if response.plan.action == "retry":
                await self._sleep(response.plan.delay)
                continue
            if response.plan.action == "rate_limited":
                response.error = RateLimited(response.plan.reason)
            return response
        raise AssertionError("unreachable: the last attempt always returns or raises")

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[httpcore.AsyncConnectionPool]:
        """Wait for one of the ``concurrency`` slots, then lend the least busy pool."""
        async with self._slots:
            index = self._busy.index(min(self._busy))  # the first on a tie
            self._busy[index] += 1
            try:
                yield self._pools[index]
            finally:
                self._busy[index] -= 1

    async def _exchange(
        self,
        method: str,
        url: httpx.URL,
        headers: list[tuple[bytes, bytes]],
        body: BodyPlan,
        deadline: float,
        plan: Callable[[int, dict[str, str]], Plan],
        content: bytes | None = None,
    ) -> _Response:
        """Send one request and read (or skip) its body, all within ``deadline`` seconds."""
        async with self._slot() as pool:
            started = time.monotonic()
            loop_deadline = asyncio.get_running_loop().time() + deadline
            request = httpcore.Request(
                method.encode(),
                httpcore.URL(
                    scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
                ),
                headers=[(b"Host", url.netloc), *self._headers, *headers],
                content=content,
                extensions={"timeout": self._timeouts},
            )
            try:
                async with asyncio.timeout_at(loop_deadline):
                    raw = await pool.handle_async_request(request)
            except TimeoutError:
                raise _deadline_cut(deadline) from None
            except HTTPCORE_ERRORS as exc:
                raise translate(exc, in_body=False) from None
            try:
                response = _head(raw, str(url), time.monotonic() - started)
                response.plan = plan(response.status, response.headers)
                redirect = response.status in REDIRECT_STATUSES and "location" in response.headers
                # A 204 or 304 has no body by the protocol: drained, its connection stays.
                bodiless = method == "HEAD" or response.status in (204, 304)
                want = body.keep if body.keep is not None else (
                    response.content_type in HTML_TYPES or response.content_type in UNLABELLED)
                # An error page's HTML is never parsed: its answer is its status, which a slow, cut or
                # huge body must not turn into a fetch failure. Drained, a small one keeps its connection.
                # The same for a body bound for a file: read only to be read whole, which an error's never is.
                error_page = (body.keep is None and want or body.into is not None) and not 200 <= response.status < 300
                if response.plan.action != "final" or bodiless or redirect or error_page:
                    await drain(raw, method, response, loop_deadline)
                    if bodiless and want and method != "HEAD" and response.plan.action == "final":
                        if body.into is None:
                            response.body = b""
                        else:
                            body.into.seek(0)
                            body.into.truncate()
                    return response
                if not want:
                    # Headers are all we need; closing now spares reading a PDF or video.
                    return response
                try:
                    async with asyncio.timeout_at(loop_deadline):
                        await read_body(raw, response, body, self.policy)
                except TimeoutError:
                    response.error = _deadline_cut(deadline)
                    response.body = None
                return response
            finally:
                # httpcore keeps the connection only when the response was read to
                # its end; any other connection is closed, so no late body can be
                # read as the next request's answer.
                await raw.aclose()

    def _finished(
        self, trail: _Trail, response: _Response, error: CrawlError | None = None
    ) -> FetchResult:
        error = error or response.error
        return FetchResult(
            url=trail.url,
            final_url=response.url,
            status=response.status,
            redirects=tuple(trail.hops),
            content_type=response.content_type,
            charset=response.charset,
            headers=response.headers,
            body=response.body if error is None or response.error is error else None,
            size=response.size,
            ttfb=response.ttfb,
            elapsed=time.monotonic() - trail.started,
            error=error.code if error else None,
            error_detail=_short(error.message if error else response.detail),
            attempts=max(1, trail.attempts),
            method=trail.method,
            retry_after=response.plan.retry_after if isinstance(error, RateLimited) else None,
            set_cookies=response.set_cookies,
            redirect_cookies=tuple(trail.cookies),
            binary=response.binary,
        )

    def _failed(self, trail: _Trail, url: str, error: CrawlError) -> FetchResult:
        final_url = trail.hops[-1].location if trail.hops else url
        return FetchResult(
            url=trail.url,
            final_url=final_url,
            redirects=tuple(trail.hops),
            elapsed=time.monotonic() - trail.started,
            error=error.code,
            error_detail=_short(error.message),
            attempts=trail.attempts,
            method=trail.method,
            redirect_cookies=tuple(trail.cookies),
        )


@functools.lru_cache(maxsize=2)
def default_ssl_context(verify: bool) -> ssl.SSLContext:
    """The process's TLS context: built once, since loading the CA bundle is slow and the
    orchestrator makes a Fetcher per chunk. A context is safe to share once built."""
    return httpx.create_ssl_context(verify=verify, trust_env=False)


# Headers that hold one value, never a list: joined with a comma they would read as one made-up value.
_ONE_VALUE = frozenset({"content-type", "location", "etag", "last-modified", "date", "retry-after"})


def _head(raw: httpcore.Response, url: str, ttfb: float) -> _Response:
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in raw.headers:
        # h11 has checked that names are tokens (ASCII); httpcore keeps their case.
        key = name.decode("ascii").lower()
        text = header_text(value)
        if key in headers and key in _ONE_VALUE:
            # A header stacked twice (nginx add_header over the upstream's): the last Content-Type counts,
            # as in browsers (WHATWG "extract a MIME type"); Location and the dates are the first, one URL or date.
            if key == "content-type":
                headers[key] = text
            continue
        # Repeated headers join with commas, X-Robots-Tag lines with a newline, which no value holds:
        # an agent prefix there applies within its own line (directives.header_robots_directives).
        headers[key] = (headers[key] + ("\n" if key == "x-robots-tag" else ", ") + text) if key in headers else text
        if key == "set-cookie":  # joined with commas it cannot be read back (Expires has one)
            cookies.append(text)
    content_type, charset = parse_content_type(headers.get("content-type", ""))
    return _Response(
        url=url,
        status=raw.status,
        headers=headers,
        content_type=content_type,
        charset=charset,
        ttfb=ttfb,
        plan=FINAL,
        set_cookies=tuple(cookies),
    )


def _deadline_cut(deadline: float) -> DeadlineExceeded:
    return DeadlineExceeded(f"No complete response within the {deadline:g} s deadline")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def _declared_size(result: FetchResult) -> FetchResult:
    """A checked URL with the size its answer declares: its body is never read (large_image reads it)."""
    declared = content_length(result.headers) if result.status is not None else None
    return replace(result, declared_size=declared) if declared else result


__all__ = [
    "FetchPolicy",
    "Fetcher",
    "MiB",
]

"""One JSON POST to a webhook, through the SSRF guard, bounded in time and bytes.

``post_json`` is called synchronously (from a worker task) and never raises:
a refused address, a DNS failure, a timeout, a connection error or a non-2xx
answer all come back as a ``WebhookResult`` with ``ok=False`` and a short detail.

* The request goes through an httpcore pool dialling via ``net.GuardedBackend``,
  so the webhook's host is resolved once and checked like a crawl target.
* ``asyncio.timeout`` bounds the whole exchange (DNS, connect, TLS, request,
  response head and the body read): httpcore's own timeouts are per socket
  operation, which a server dripping bytes never trips.
* Redirects are not followed (a 3xx is a failure): following one would be a
  second, unchecked request the site owner did not configure.
* A 2xx answer's body is not read; of any other, at most ``MAX_RESPONSE_BYTES``
  are read, only for the detail.
* With a ``secret``, the body is signed as GitHub signs its webhooks: header
  ``X-Siteward-Signature-256: sha256=<hex HMAC-SHA256 of the body's bytes>``,
  so a receiver can tell the alert came from this server, unchanged.
* ``retry`` is set only when the alert was surely not taken: no connection was
  made, or the answer was 429, 502, 503 or 504. A timeout is not retried: the
  endpoint may have acted on the request, and an alert must not arrive twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import hmac
import json
import ssl
from dataclasses import dataclass
from typing import Any

import httpcore

from .errors import CrawlError, DnsFailure, UnsafeAddress
from .fetch import default_ssl_context
from .net import AddressGuard, GuardedBackend
from .request_url import basic_auth, parse_url, strip

MAX_RESPONSE_BYTES = 4096
SIGNATURE_HEADER = b"X-Siteward-Signature-256"
# Answers that say "not now" about a request not acted on.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
USER_AGENT = "SitewardBot/0.1 (+self-hosted site audit; webhook)"
_MAX_DETAIL = 300


@dataclass(frozen=True)
class WebhookResult:
    ok: bool
    status: int | None
    detail: str
    retry: bool = False


def post_json(
    url: str,
    payload: Any,
    *,
    guard: AddressGuard,
    timeout: float,
    user_agent: str = USER_AGENT,
    secret: str = "",
) -> WebhookResult:
    """POST ``payload`` as JSON to ``url``; the outcome as a result, never an exception."""
    try:
        body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        return WebhookResult(False, None, _short(f"The payload is not JSON: {exc}"))
    signed = [(SIGNATURE_HEADER, b"sha256=" + signature(secret, body).encode())] if secret else []
    run = functools.partial(_post, url, body, guard, timeout, user_agent, signed)
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(run())
        # Called from inside an event loop (an async caller): asyncio.run needs a
        # thread of its own, so the exchange runs on a helper thread.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, run()).result()
    except Exception as exc:  # noqa: BLE001 - the promise is "never raises"
        return WebhookResult(False, None, _short(f"{type(exc).__name__}: {exc}"))


def signature(secret: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``body`` keyed with ``secret``: what a receiver computes to check a POST."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def _post(
    url: str, body: bytes, guard: AddressGuard, timeout: float, user_agent: str, signed: list
) -> WebhookResult:
    try:
        target = parse_url(url)
    except CrawlError as exc:
        return WebhookResult(False, None, _short(exc.message))
    credentials = basic_auth(target)
    target = strip(target)
    headers = [
        (b"Host", target.netloc),
        (b"User-Agent", user_agent.encode()),
        (b"Content-Type", b"application/json"),
        (b"Accept", b"*/*"),
        # httpcore sends the body as given; h11 needs the length declared.
        (b"Content-Length", str(len(body)).encode()),
        *signed,
    ]
    if credentials:
        headers.append((b"Authorization", credentials.encode()))
    request = httpcore.Request(
        b"POST",
        httpcore.URL(
            scheme=target.raw_scheme, host=target.raw_host, port=target.port, target=target.raw_path
        ),
        headers=headers,
        content=body,
        extensions={
            "timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        },
    )
    pool = httpcore.AsyncConnectionPool(
        ssl_context=default_ssl_context(True),
        max_connections=1,
        max_keepalive_connections=0,
        http1=True,
        http2=False,
        network_backend=GuardedBackend(guard),
    )
    try:
        async with pool:
            async with asyncio.timeout(timeout):
                return await _exchange(pool, request)
    except TimeoutError:
        return WebhookResult(False, None, f"No answer within {timeout:g} s")
    except UnsafeAddress as exc:
        return WebhookResult(False, None, _short(f"Refused: {exc.message}"))
    except DnsFailure as exc:
        return WebhookResult(False, None, _short(exc.message))
    except httpcore.TimeoutException:
        return WebhookResult(False, None, f"No answer within {timeout:g} s")
    except httpcore.ConnectError as exc:
        return WebhookResult(False, None, _short(f"Could not connect: {str(exc) or 'connection refused'}"),
                             retry=True)
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
        return WebhookResult(False, None, _short(f"{type(exc).__name__}: {exc}"))
    except ssl.SSLError as exc:
        return WebhookResult(False, None, _short(f"TLS failed: {exc}"))


async def _exchange(pool: httpcore.AsyncConnectionPool, request: httpcore.Request) -> WebhookResult:
    response = await pool.handle_async_request(request)
    status = response.status
    try:
        if 200 <= status < 300:
            # Delivered: its body says nothing we keep, and one that stalls must not turn this into a failure.
            return WebhookResult(True, status, f"HTTP {status}")
        answer = bytearray()
        async for chunk in response.aiter_stream():
            answer += chunk
            if len(answer) >= MAX_RESPONSE_BYTES:
                break  # the rest is not needed; closing drops the connection
    finally:
        await response.aclose()
    text = bytes(answer[:MAX_RESPONSE_BYTES]).decode("utf-8", "replace").strip()
    if 300 <= status < 400:
        location = _header(response, b"location")
        text = f"redirect to {location} not followed" if location else "redirect not followed"
    return WebhookResult(False, status, _short(f"HTTP {status}" + (f": {text}" if text else "")),
                         retry=status in RETRY_STATUSES)


def _header(response: httpcore.Response, name: bytes) -> str:
    for key, value in response.headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"

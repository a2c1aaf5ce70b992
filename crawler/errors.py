"""The exceptions the fetch layer raises internally, one per named outcome.

Each class carries its ``FetchError`` code, so the one place that turns a
failure into a ``FetchResult`` (``Fetcher.fetch``) needs a single
``except CrawlError`` and never stores a stack trace. Messages are short and
meant for people reading an audit report.
"""

from __future__ import annotations

from typing import ClassVar

from .types import FetchError


class CrawlError(Exception):
    """Base class: something a site (or its DNS) did that ends one fetch."""

    code: ClassVar[FetchError] = FetchError.UNKNOWN
    # Network hiccups are worth another attempt; a site's deliberate answer
    # (too large, bad TLS, a loop) would only be repeated.
    retryable: ClassVar[bool] = False

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.code.label
        super().__init__(self.message)


class DnsFailure(CrawlError):
    code = FetchError.DNS_FAILURE


class DnsTemporaryFailure(DnsFailure):
    # The resolver had no answer this time (EAI_AGAIN, the lookup timeout): worth
    # another attempt like a failed connect. A name that does not exist stays final.
    retryable = True


class UnsafeAddress(CrawlError):
    """The host resolves to an address we refuse to connect to (SSRF guard)."""

    code = FetchError.SSRF_BLOCKED

    def __init__(self, message: str | None = None, *, address: str = "", reason: str = "") -> None:
        self.address = address
        self.reason = reason
        super().__init__(message)


class InvalidURLError(CrawlError):
    code = FetchError.INVALID_URL


class ConnectFailed(CrawlError):
    code = FetchError.CONNECT_FAILED
    retryable = True


class FetchTimeout(CrawlError):
    """Base for the timeouts; the subclasses say which clock ran out."""

    code = FetchError.READ_TIMEOUT
    retryable = True


class ConnectTimeoutError(FetchTimeout):
    code = FetchError.CONNECT_TIMEOUT


class ReadTimeoutError(FetchTimeout):
    code = FetchError.READ_TIMEOUT


class DeadlineExceeded(FetchTimeout):
    # A tarpit would hold the next attempt just as long, so this is final.
    code = FetchError.DEADLINE_EXCEEDED
    retryable = False


class TLSFailure(CrawlError):
    code = FetchError.TLS_ERROR


class ProtocolFailure(CrawlError):
    code = FetchError.PROTOCOL_ERROR


class IncompleteBody(CrawlError):
    code = FetchError.INCOMPLETE_BODY
    retryable = True


class BodyTooLarge(CrawlError):
    code = FetchError.BODY_TOO_LARGE


class DecompressionLimit(CrawlError):
    code = FetchError.DECOMPRESSION_LIMIT


class RedirectLoop(CrawlError):
    code = FetchError.REDIRECT_LOOP


class TooManyRedirects(CrawlError):
    code = FetchError.TOO_MANY_REDIRECTS


class RedirectBlockedScheme(CrawlError):
    code = FetchError.REDIRECT_BLOCKED_SCHEME


class RateLimited(CrawlError):
    code = FetchError.RATE_LIMITED

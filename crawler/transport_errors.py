"""httpcore's failures as our named outcomes, decided by type and by where they happened."""

from __future__ import annotations

import errno
import os
import re
import ssl
from typing import TypeVar

import httpcore

from .errors import (
    ConnectFailed,
    ConnectTimeoutError,
    CrawlError,
    IncompleteBody,
    InvalidURLError,
    ProtocolFailure,
    ReadTimeoutError,
    TLSFailure,
)

_E = TypeVar("_E", bound=BaseException)

# The detail of a connect the host refused outright (it answered, with a reset): an answer, unlike a
# timeout or an unreachable network. crawler.http_probe reads a refused http:// port as "nothing served".
CONNECTION_REFUSED = f"Could not connect: {os.strerror(errno.ECONNREFUSED)}"

# Everything httpcore raises for a request (connection, timeout, HTTP framing).
HTTPCORE_ERRORS = (
    httpcore.NetworkError,
    httpcore.TimeoutException,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
)


def translate(exc: Exception, *, in_body: bool, at_eof: bool = False) -> CrawlError:
    """Map an httpcore failure to our named outcome with a short message.

    Decided by the exception's type and by where it happened: before the
    response head or in the body, and, for a body that breaks off, whether
    the server had closed the connection (``at_eof``).
    """
    message = str(exc) or type(exc).__name__
    if isinstance(exc, httpcore.ConnectTimeout):
        return ConnectTimeoutError("Connection timed out")
    if isinstance(exc, httpcore.TimeoutException):
        return ReadTimeoutError("The server stopped sending data (read timeout)")
    if isinstance(exc, httpcore.ConnectError):
        tls = _cause(exc, ssl.SSLError)
        if tls is not None:
            reason = (
                getattr(tls, "verify_message", None) or getattr(tls, "reason", None) or str(tls)
            )
            return TLSFailure(f"TLS failed: {reason}")
        # anyio wraps the socket error ("All connection attempts failed");
        # the errno underneath says what actually happened.
        os_error = _cause(exc, OSError, with_errno=True)
        if os_error is not None and os_error.errno == errno.ECONNREFUSED:
            return ConnectFailed(CONNECTION_REFUSED)
        if os_error is not None:
            return ConnectFailed(f"Could not connect: {os.strerror(os_error.errno)}")
        return ConnectFailed(f"Could not connect: {message}")
    if isinstance(exc, (httpcore.ReadError, httpcore.WriteError)):
        if in_body:
            return IncompleteBody("The connection broke before the body was complete")
        return ConnectFailed(f"The connection broke before a response: {message}")
    if isinstance(exc, httpcore.RemoteProtocolError):
        if in_body and at_eof:
            return IncompleteBody("The server closed the connection before the body was complete")
        return ProtocolFailure(f"Malformed HTTP response: {_plain(message)}")
    if isinstance(exc, httpcore.UnsupportedProtocol):
        return InvalidURLError(f"Invalid URL: {message}")
    if isinstance(exc, httpcore.LocalProtocolError):
        # h11's text quotes the offending header whole (a Cookie or Authorization
        # value among them), and error details are shown and stored: never include it.
        return ProtocolFailure("The request could not be sent: one of its headers is not valid HTTP")
    return ProtocolFailure(f"HTTP error: {message}")


def _plain(message: str) -> str:
    # h11 quotes the offending bytes as bytearray(b'...'); a report needs just the text.
    return re.sub(r"bytearray\(b(['\"])(.*?)\1\)", r"'\2'", message)


def _cause(exc: BaseException, kind: type[_E], *, with_errno: bool = False) -> _E | None:
    """The first exception of ``kind`` in ``exc``'s cause chain (bounded walk)."""
    current: BaseException | None = exc
    for _ in range(10):
        if current is None:
            return None
        if isinstance(current, kind) and (not with_errno or getattr(current, "errno", None)):
            return current
        current = current.__cause__ or current.__context__
    return None

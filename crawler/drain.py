"""Unwanted response bodies: a tiny one is read so its connection goes back to the pool, the rest closes it."""

from __future__ import annotations

import asyncio

import httpcore

from .response_head import content_length
from .transport_errors import HTTPCORE_ERRORS

# Unwanted bodies up to this size are read so the connection can be reused.
DRAIN_LIMIT = 16 * 1024
# ... when they arrive within this many seconds: one that has not is a server's stall, and
# waiting the request's whole deadline for it at each hop of a redirect chain would spend
# the fetch's budget on bytes nobody reads.
DRAIN_SECONDS = 2.0


async def drain_small(
    raw: httpcore.Response, method: str, response, loop_deadline: float
) -> None:
    """Read the tiny body of a redirect or retried answer so its connection
    goes back to the pool (httpcore closes a connection whose response was not
    read to the end). Larger or unknown-length bodies are not worth it: the
    connection is simply closed. An answer with no body by the protocol (HEAD,
    204, 304) keeps its connection whatever length it declares, as RFC 9112
    6.3 frames it; bytes a broken server sends after it anyway close the
    connection when they are already read (``overrun.drain``) or arrive while
    it waits in the pool (httpcore's readable check), as curl and browsers do."""
    declared = content_length(response.headers)
    bodiless = method == "HEAD" or response.status in (204, 304)
    small = declared is not None and declared <= DRAIN_LIMIT
    if not bodiless and (not small or "transfer-encoding" in response.headers):
        return
    try:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout_at(min(loop_deadline, loop.time() + DRAIN_SECONDS)):
            async for chunk in raw.aiter_stream():
                response.size += len(chunk)
    except (TimeoutError, *HTTPCORE_ERRORS):
        # The answer we needed (status and headers) is complete; a failure in
        # the unwanted remainder only costs the connection, which aclose drops.
        pass

"""Connections whose server sent more than its answer declared: closed, not pooled.

h11 ends a body at its Content-Length (at once for HEAD, 204 and 304) and
keeps any surplus in its buffer, where the next request on that keep-alive
connection would read it as its own answer. ``net.CountingStream`` knows how
many bytes arrived and where the head ended, which is enough to tell.
"""

from __future__ import annotations

import httpcore

from .drain import drain_small
from .net import CountingStream
from .response_head import content_length


async def drop_if_overrun(stream: CountingStream, headers: dict[str, str]) -> int:
    """Close ``stream`` when more than the head and the declared body arrived.
    A closed stream reads as readable, which makes httpcore's pool drop it.
    Returns the surplus past a final answer's declared body (``CountingStream.overrun``)."""
    declared = content_length(headers)
    if declared is None or "transfer-encoding" in headers:
        return 0
    close, surplus = stream.overrun(declared)
    if close:
        await stream.aclose()
    return surplus


async def drain(raw: httpcore.Response, method: str, response, loop_deadline: float) -> None:
    """``drain_small``, then the overrun check on what it read: a redirect's
    drained body can carry a fake next answer as well as a page's can. When
    the body was left unread the connection closes anyway."""
    await drain_small(raw, method, response, loop_deadline)
    bodiless = method == "HEAD" or response.status in (204, 304)
    headers = {"content-length": "0"} if bodiless else response.headers
    await drop_if_overrun(raw.extensions["network_stream"], headers)

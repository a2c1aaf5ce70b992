"""Reading an answer's body within the wire and decoded caps, into memory or a file.

httpcore hands the raw stream (chunking undone, Content-Encoding not); it is
inflated here in bounded steps (``inflate.Decoder``), counted on the wire
(``net.CountingStream``) so chunk framing cannot pass the cap unseen, and a
body served as HTML is sniffed so binary data is not read as a page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

import httpcore

from .charset import SNIFF_BYTES, looks_binary
from .errors import BodyTooLarge, CrawlError, DecompressionLimit, ProtocolFailure
from .inflate import Decoder, UnsupportedCoding
from .net import CountingStream
from .overrun import drop_if_overrun
from .response_head import content_length
from .transport_errors import HTTPCORE_ERRORS, translate

if TYPE_CHECKING:
    from .fetch import FetchPolicy, _Response


@dataclass(frozen=True, slots=True)
class BodyPlan:
    """What to do with a final answer's body: ``keep`` as ``Fetcher.fetch`` takes it,
    ``max_bytes`` the caps' override, ``into`` a file that takes it instead of memory."""

    keep: bool | None = None
    max_bytes: int | None = None
    into: BinaryIO | None = None


HEADERS_ONLY = BodyPlan(keep=False)


async def read_body(raw: httpcore.Response, response: _Response, plan: BodyPlan, policy: FetchPolicy) -> None:
    """Fill ``response.body`` (or ``plan.into``) within the wire and decoded caps, or set ``response.error``.

    A body read because its type said HTML is sniffed: the reading stops at
    the first bytes if they are binary data (``response.binary``).
    """
    # A body written to a file is whole or nothing (a sitemap cut at its cap is not read):
    # a Content-Length over the cap ends the read before its first byte.
    max_bytes, sniff, into = plan.max_bytes, plan.keep is None, plan.into
    partial = plan.keep is True and into is None
    if into is not None:
        # Emptied for each read: a retried answer replaces the one before. The
        # writes go to a spooled file, in memory until it rolls over to disk.
        into.seek(0)
        into.truncate()
    wire_cap = max_bytes if max_bytes is not None else policy.max_body_bytes
    decoded_cap = max_bytes if max_bytes is not None else policy.max_decoded_bytes
    declared = content_length(response.headers)
    if declared is not None and declared > wire_cap and not partial:
        response.error = BodyTooLarge(
            f"Content-Length is {declared} bytes, more than the {wire_cap}-byte cap"
        )
        return
    try:
        decoder = Decoder(response.headers.get("content-encoding", ""), decoded_cap)
    except UnsupportedCoding as exc:
        # A coding we never asked for (br, zstd): the page exists and works
        # in browsers, so this is not a failure of the URL, but we cannot
        # read it; say so and leave the body out.
        response.detail = str(exc)
        return
    stream: CountingStream = raw.extensions["network_stream"]
    # The count starts after the read that completed the head, so the body
    # bytes delivered are counted too: whichever is larger is the wire size.
    received_before = stream.bytes_read
    delivered = 0
    body = bytearray()
    try:
        async for chunk in raw.aiter_stream():
            room = wire_cap - delivered
            delivered += len(chunk)
            response.size = max(delivered, stream.bytes_read - received_before)
            for piece in decoder.feed(chunk if len(chunk) <= room else chunk[:room]):
                if into is not None:
                    into.write(piece)
                    continue
                body += piece
                if sniff and len(body) >= SNIFF_BYTES:
                    sniff = False
                    if _binary(response, body):
                        return
            if response.size > wire_cap:
                response.error = BodyTooLarge(f"Body is larger than the {wire_cap}-byte cap")
                break
            if decoder.exceeded:
                break
        else:
            for piece in decoder.flush():
                if into is not None:
                    into.write(piece)
                else:
                    body += piece
            surplus = await drop_if_overrun(stream, response.headers)
            if surplus:
                # A Content-Length too small for what the server sent: the body read may be cut short,
                # and the rest is not an answer. RELIABILITY row 20 names it a malformed response.
                response.error = ProtocolFailure(f"Malformed HTTP response: {surplus} more bytes arrived after "
                                                 f"the {declared}-byte body its Content-Length declared")
            elif sniff and _binary(response, body):
                return
    except HTTPCORE_ERRORS as exc:
        response.error = translate(exc, in_body=True, at_eof=stream.at_eof)
    except CrawlError as exc:  # a corrupt compressed stream
        response.error = exc
    if decoder.exceeded and response.error is None:
        response.error = DecompressionLimit(f"Body expands past the {decoded_cap}-byte cap")
    cut_at_cap = isinstance(response.error, (BodyTooLarge, DecompressionLimit))
    if into is None and (response.error is None or (partial and cut_at_cap)):
        response.body = bytes(body)
        if response.content_type in UNLABELLED and response.error is None:
            _sniff_unlabelled(response)


# Types a browser sniffs the body of instead of believing (WHATWG MIME Sniffing 7): none sent, or a
# placeholder. A page served so is HTML to a browser when it opens like HTML, so to the crawl too.
UNLABELLED = frozenset({"", "unknown/unknown", "application/unknown", "*/*"})
# WHATWG MIME Sniffing 7.1's patterns for HTML, each followed by a space or ">" (or, as
# browsers accept in practice, another whitespace byte), after any leading whitespace.
_HTML_OPENERS = (b"<!doctype html", b"<html", b"<head", b"<script", b"<iframe", b"<h1", b"<div", b"<font",
                 b"<table", b"<a", b"<style", b"<title", b"<b", b"<body", b"<br", b"<p", b"<!--")
_TAG_END = frozenset(b" >\t\n\r\x0c")


def _sniff_unlabelled(response: _Response) -> None:
    """An unlabelled body is read as HTML when it opens like HTML, and is no page's body otherwise."""
    head = response.body[:SNIFF_BYTES].removeprefix(b"\xef\xbb\xbf").lstrip(b"\t\n\x0c\r ").lower()
    for opener in _HTML_OPENERS:
        if head.startswith(opener) and len(head) > len(opener) and head[len(opener)] in _TAG_END:
            response.detail = "served without a usable Content-Type; read as HTML, as a browser sniffs it"
            response.content_type = "text/html"
            return
    response.body = None


def _binary(response: _Response, body: bytearray) -> bool:
    """Mark a body served as HTML whose first bytes are binary data; it is not read further."""
    if not looks_binary(body, response.charset):
        return False
    response.binary = True
    response.detail = f"served as {response.content_type}, but its first bytes are binary data; not read"
    return True

"""Bounded, stepwise decompression of a response body (gzip and deflate, stacked or not).

httpx inflates a whole raw chunk in one call with no bound, so a 200 KB gzip bomb
becomes one 67 MB chunk. Here each inflate call produces at most INFLATE_STEP
bytes (``decompressobj().decompress(data, max_length)``), as Scrapy does since
CVE-2025-6176, and a stage stops one byte past its cap.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from .errors import DecompressionLimit, IncompleteBody, ProtocolFailure

# Stacked codings beyond this are an attack, not a website.
MAX_CODINGS = 3
_GZIP_MAGIC = b"\x1f\x8b"
# Concatenated gzip members are legal; a body of thousands of them is not.
MAX_GZIP_MEMBERS = 32
# Largest piece one inflate call may produce: small enough that a bomb never
# holds a second copy of its expansion, large enough to keep calls few.
INFLATE_STEP = 64 * 1024


# The registered compression codings we cannot undo. Any other token (utf-8, none, binary: server
# misconfigurations) is no coding at all, and browsers read such a body as it is; so do we.
UNREADABLE_CODINGS = frozenset({"br", "zstd", "compress", "x-compress", "dcb", "dcz", "exi", "pack200-gzip",
                                "aes128gcm"})


class UnsupportedCoding(Exception):
    """A Content-Encoding we never asked for, or too many of them stacked."""


class Inflater:
    """One bounded gzip or deflate stage: never produces more than ``limit`` bytes."""

    def __init__(self, coding: str, limit: int) -> None:
        self.gzip = coding in ("gzip", "x-gzip")
        self.coding = coding
        self.limit = limit
        self.produced = 0
        self.exceeded = False
        self.finished = False
        self.members = 1
        self.started = False
        # A gzip member ended with the data fed so far: the next data may open another.
        self.between = False
        self._inflater = zlib.decompressobj(31 if self.gzip else 15)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Inflate ``data`` in pieces of at most ``INFLATE_STEP`` bytes.

        Yielding pieces rather than joining them is what keeps a bomb's
        footprint near the cap: the caller appends each piece to the body and
        drops it, so no second copy of the expanded bytes ever exists.
        """
        if self.finished or self.exceeded or not data:
            return
        if self.between and not self._next_member(data):
            return
        while data and not self.exceeded:
            try:
                # max_length is what bounds memory: one step, and at most one
                # byte past the cap (that byte is how the overflow is seen).
                out = self._inflater.decompress(
                    data, min(INFLATE_STEP, self.limit - self.produced + 1)
                )
            except zlib.error:
                if not self.gzip and not self.started:
                    # "deflate" is meant to be zlib-wrapped, but some servers
                    # send a raw stream; browsers accept both, so do we.
                    self._inflater = zlib.decompressobj(-15)
                    self.started = True
                    continue
                raise ProtocolFailure(f"The body is not valid {self.coding} data") from None
            self.started = True
            self.produced += len(out)
            if self.produced > self.limit:
                self.exceeded = True
                out = out[: len(out) - (self.produced - self.limit)]
            if out:
                yield out
            if self._inflater.eof:
                data = self._inflater.unused_data
                if not self.gzip:
                    self.finished = True
                    break
                if not data:
                    self.between = True
                    break
                if not self._next_member(data):
                    break
            else:
                data = self._inflater.unconsumed_tail

    def _next_member(self, data: bytes) -> bool:
        """After a whole gzip member: open the next one if ``data`` starts one, else finish."""
        self.between = False
        # Another member starts with gzip's magic bytes (or the first of them, cut at a chunk's
        # end); anything else after a whole member (NUL padding, a stray CRLF) is ignored, as browsers do.
        if not _GZIP_MAGIC.startswith(data[:2]):
            self.finished = True
            return False
        if self.members >= MAX_GZIP_MEMBERS:
            # Stopping quietly would store a page cut short as if it were whole.
            raise DecompressionLimit(f"The body has more than {MAX_GZIP_MEMBERS} gzip members")
        self.members += 1
        self._inflater = zlib.decompressobj(31)
        return True

    def flush(self) -> bytes:
        """What the stage still holds at the body's end; raises IncompleteBody if its stream is unfinished."""
        if self.finished or self.exceeded or self.between or not self.started:
            return b""
        out = self._inflater.flush()
        room = self.limit - self.produced
        if len(out) > room:
            self.exceeded = True
            out = out[:room]
        self.produced += len(out)
        if not self._inflater.eof and not self.exceeded:
            # The connection closed mid-stream (a body delimited by the close has no length to check):
            # what inflated so far is a page cut short, not a page.
            raise IncompleteBody(f"The body ended before its {self.coding} stream was complete")
        return out


class Decoder:
    """Undo a Content-Encoding list (applied left to right, so undone right to left)."""

    def __init__(self, content_encoding: str, limit: int) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",")]
        codings = [c for c in codings if c in UNREADABLE_CODINGS or c in ("gzip", "x-gzip", "deflate")]
        unknown = [c for c in codings if c in UNREADABLE_CODINGS]
        if unknown:
            raise UnsupportedCoding(
                f"Content-Encoding {', '.join(unknown)} was not requested and cannot be read; "
                "the body was not parsed"
            )
        if len(codings) > MAX_CODINGS:
            raise UnsupportedCoding(
                f"Content-Encoding stacks {len(codings)} codings; the body was not parsed"
            )
        self.stages = [Inflater(c, limit) for c in reversed(codings)]

    @property
    def exceeded(self) -> bool:
        return any(stage.exceeded for stage in self.stages)

    def feed(self, data: bytes) -> Iterator[bytes]:
        return self._through(0, data)

    def flush(self) -> Iterator[bytes]:
        return self._flush_from(0)

    def _through(self, index: int, data: bytes) -> Iterator[bytes]:
        # Each piece goes through the later stages before the next is made,
        # so a stacked bomb is as bounded as a single one.
        if index == len(self.stages):
            yield data
            return
        for piece in self.stages[index].feed(data):
            yield from self._through(index + 1, piece)

    def _flush_from(self, index: int) -> Iterator[bytes]:
        if index == len(self.stages):
            return
        tail = self.stages[index].flush()
        if tail:
            yield from self._through(index + 1, tail)
        yield from self._flush_from(index + 1)

"""crawler.http11's field, blank-line and request checks accept and refuse exactly
what the regexes they replaced did (the grammar h11 read): generated heads full
of the bytes that matter (CR, LF, NUL, VT, FF, colons, spaces, tabs, non-token
characters) go through both."""

from __future__ import annotations

import random
import re

import httpx
import pytest

from crawler import http11

# The regex forms, as http11 had them until the byte-class rewrite.
_FIELD_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):(.*)")
_BAD_VALUE = re.compile(rb"[\x00\n\r\x0b\x0c]")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_TARGET = re.compile(rb"[\x21-\x7e]+")
_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[^\x00-\x08\x0a-\x1f\x7f]*")

PIECES = [b"Name", b"x-a", b"Content-Length", b":", b": ", b" ", b"\t", b"value", b"v a l", b"\r\n", b"\n",
          b"\r", b"\x00", b"\x0b", b"\x0c", b"\x01", b"\x7f", b"\xe9", b"(", b"@", b"\r\n ", b"\r\n\t", b"1"]


def _reference_fields(block: bytes):
    fields: list[tuple[bytes, bytes]] = []
    if not block:
        return fields
    folded: dict[int, list[bytes]] = {}
    for line in block.split(b"\n"):
        if line.endswith(b"\r"):
            line = line[:-1]
        if _BAD_VALUE.search(line):
            return "malformed"
        if line[:1] in (b" ", b"\t"):
            if not fields:
                return "malformed"
            index = len(fields) - 1
            folded.setdefault(index, [fields[index][1]]).append(line.strip(b" \t"))
            continue
        match = _FIELD_LINE.fullmatch(line)
        if match is None:
            return "malformed"
        fields.append((match[1].lower(), match[2].strip(b" \t")))
    for index, pieces in folded.items():
        fields[index] = (fields[index][0], b" ".join(piece for piece in pieces if piece))
    return fields


def _fields(block: bytes):
    try:
        return http11._fields(block)
    except httpx.RemoteProtocolError:
        return "malformed"


def _blocks(count: int, seed: int):
    rng = random.Random(seed)
    for _ in range(count):
        yield b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))


def test_field_blocks_parse_as_the_regexes_parsed_them():
    for block in _blocks(30_000, seed=1204):
        assert _fields(block) == _reference_fields(block), block


@pytest.mark.parametrize("block", [
    b"Server: nginx\r\nContent-Type: text/html\r\nContent-Length: 5",  # the usual head
    b"A: 1\nB: 2",  # bare line feeds
    b"A: 1\r\nB: x\ry",  # a CR inside a value
    b"A: 1\r\r\nB: 2",  # a CR before the line's own ending
    b"A: x\x00y",
    b"A: 1\r\n folded\r\n\tmore",
    b" leading: fold",
    b": no name",
    b"no colon",
    b"Bad Name: x",
])
def test_the_heads_each_fast_path_skips_parse_as_before(block):
    assert _fields(block) == _reference_fields(block)


def test_the_blank_line_is_found_where_the_pattern_found_it():
    rng = random.Random(412)
    pieces = [b"\r", b"\n", b"\r\n", b"a", b"HTTP/1.1 200 OK", b"X: y"]
    for _ in range(30_000):
        buffer = bytearray(b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 14))))
        start = rng.randint(0, len(buffer))
        match = _HEAD_END.search(buffer, start)
        expected = None if match is None else (match.start(), match.end())
        assert http11._blank_line(buffer, start) == expected, (bytes(buffer), start)


def _reference_request_ok(method: bytes, target: bytes, headers) -> bool:
    if _NAME.fullmatch(method) is None or _TARGET.fullmatch(target) is None:
        return False
    return all(_NAME.fullmatch(name) is not None and _VALUE.fullmatch(value) is not None
               for name, value in headers)


def test_requests_are_refused_exactly_where_the_patterns_refused_them():
    rng = random.Random(2026)
    every_byte = [bytes([b]) for b in range(256)]
    for _ in range(20_000):
        method = b"".join(rng.choice([b"GET", b"HEAD", b" ", b"\x00", b"("] + every_byte[::17])
                          for _ in range(rng.randint(0, 2)))
        target = b"".join(rng.choice([b"/a", b"?q=1", b"%20"] + every_byte[::5]) for _ in range(rng.randint(0, 4)))
        name = b"".join(rng.choice([b"X-A", b"Host"] + every_byte[::11]) for _ in range(rng.randint(0, 2)))
        value = b"".join(rng.choice([b"v", b"\t", b" "] + every_byte[::3]) for _ in range(rng.randint(0, 4)))
        headers = [(b"User-Agent", b"SitewardBot/0.1"), (name, value)]
        try:
            request = http11._request(method, target, headers)
        except httpx.LocalProtocolError:
            accepted = False
        else:
            accepted = True
            assert request.startswith(method + b" " + target + b" HTTP/1.1\r\n")
        assert accepted == _reference_request_ok(method, target, headers), (method, target, name, value)

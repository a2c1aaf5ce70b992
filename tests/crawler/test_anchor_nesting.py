"""Nested anchors: each one's text is every text below it, so collecting it per
anchor made a page of nested <a> quadratic in time and memory."""

from __future__ import annotations

import random
import time
import tracemalloc

import pytest

from crawler.html_rules import _WS, TextBuffer, clip, joined_clip, settle_chunk
from crawler.parse import parse_html
from crawler.parse_bs4 import parse_html_bs4

URL = "http://127.0.0.1/"


def page(*parts: bytes) -> bytes:
    return b"<html><body>" + b"".join(parts) + b"</body></html>"


def test_nested_anchors_over_one_long_text_node_keep_one_clipped_text_each():
    # Deeper than libxml2's 256 levels, so the event path reads it. Before the
    # fix every anchor kept and re-scanned the whole 16 KB text: ~65 MB here.
    n = 8000
    body = page(b"<span><a href='/a'>" * n, b"x " * n, b"</a></span>" * n)
    tracemalloc.start()
    try:
        facts = parse_html(body, URL)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert facts.links[0].text == clip("x " * n, 200)
    assert peak < 8 * 1024 * 1024


def test_nested_anchors_over_many_small_chunks_feed_one_buffer_per_chunk():
    # 4000 anchors x 4000 chunks: every chunk offered to every open anchor
    # took ~3 s; one buffer per chunk takes milliseconds.
    n = 4000
    body = page(b"<span><a href='/a'>" * n, b"x<i></i>" * n, b"</a></span>" * n)
    started = time.perf_counter()
    facts = parse_html(body, URL)
    assert time.perf_counter() - started < 1.0
    assert facts.links[0].text == clip("x " * n, 200)


def test_anchors_interleaved_with_text_and_images_read_as_beautifulsoup_does():
    rng = random.Random(3)
    pieces = [
        b"<span><a href='/a%d'>", b"</a>", b"</span>", b"word%d ", b"  \n ",
        b"<img alt='alt%d'>", b"<i>", b"</i>", b"<a>", b"<!-- c -->",
    ]
    for _ in range(150):
        parts = []
        for i in range(rng.randint(1, 40)):
            piece = rng.choice(pieces + [b"x" * rng.randint(0, 900)])
            parts.append(piece % i if b"%d" in piece else piece)
        body = page(*parts)
        # As it is, and deeper than 256 levels (the event path).
        for variant in (body, b"<div>" * 300 + body):
            assert parse_html(variant, URL).links == parse_html_bs4(variant, URL).links


@pytest.mark.parametrize("parser", [parse_html, parse_html_bs4])
def test_nested_anchors_over_a_long_text_read_it_once(parser):
    body = page(b"".join(b"<span><a href='/a%d'>" % i for i in range(200)), b"word " * 200_000)
    started = time.perf_counter()
    links = parser(body, URL).links
    assert time.perf_counter() - started < 1.0
    assert {link.text for link in links} == {clip("word " * 100, 200)}


def test_a_settled_chunk_and_a_full_buffer_keep_only_what_the_clip_can_show():
    rng = random.Random(1)
    alphabet = ["a", "b", " ", "\n", "\t", "\u00a0", "\u2003", "xyz", "  "]
    for _ in range(5000):
        cap = rng.choice([1, 5, 20])
        chunks = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
            for _ in range(rng.randint(0, 6))
        ]
        for chunk in chunks:
            expected = _WS.sub(" ", chunk)[: cap + 2] if len(chunk) > 4 * cap + 64 else chunk
            assert settle_chunk(chunk, cap) == expected
        assert joined_clip(chunks, cap) == clip(" ".join(chunks), cap)
        buf = TextBuffer(cap)
        for chunk in chunks:
            buf.add(settle_chunk(chunk, cap))
        assert buf.value() == clip("".join(chunks), cap)
        assert not buf.full or buf.size == cap + 2

"""crawler.wire_url: a canonical URL read without httpx's parser gives exactly what
httpx.URL gives, and anything not canonical is left to httpx."""

from __future__ import annotations

import random
import re

import httpx
import pytest

from benchmarks.corpus import build_corpus
from crawler import wire_url
from crawler.urls import normalize

CANONICAL = [
    "http://example.com/",
    "https://www.example.com/a/b.html",
    "http://127.0.0.1:8080/p/1.html",
    "https://shop.example.co.uk:8443/cart?item=3&qty=1",
    "http://example.com/search?q=caf%C3%A9&page=2",
    "http://example.com/p?",
    "http://example.com/a;b=c/d:e@f/~g_h-i.j!$&'()*+,=",
    "http://example.com/?redirect=/next?x=1",
    "http://example.com/%2e%2E/upper-and-lower-escapes",
    "http://1.2.3/three-numeric-labels-is-a-name",
    "http://example.com/a%41%4a?b=%7e%7E",
]

NOT_CANONICAL = [
    "HTTP://example.com/",  # scheme case
    "http://Example.com/",  # host case
    "http://example.com",  # no path: httpx adds "/"
    "http://example.com:80/",  # default port: httpx drops it
    "https://example.com:443/",
    "http://example.com:080/",  # leading zero
    "http://user:pw@example.com/",  # credentials
    "http://example.com/#top",  # fragment
    "http://example.com/a/./b",  # dot segments: httpx removes them
    "http://example.com/a/../b",
    "http://example.com/a/..",
    "http://example.com/a b",  # httpx quotes these
    "http://example.com/a|b",
    "http://example.com/a%zz",
    "http://example.com/a%4",  # a "%" that starts no escape: httpx quotes it
    "http://example.com/a%",
    "http://example.com/%%41",
    "http://example.com/q?x=%G1",
    "http://example.com/q?x=%",
    "http://example.com/q?x={}",
    "http://café.example/",  # IDNA
    "http://xn--caf-dma.example/menu",  # httpx.URL.host decodes it
    "http://[::1]:8000/",  # IPv6 literal
    "http://999.1.1.1/",  # httpx refuses the address
    "http://example.com./",  # trailing dot
    "ftp://example.com/",
    "http://example.com/\t",
]


def _parts(url) -> tuple:
    return (str(url), url.scheme, url.host, url.port, url.raw_scheme, url.raw_host, url.netloc, url.raw_path,
            url.userinfo, url.fragment)


@pytest.mark.parametrize("url", CANONICAL)
def test_a_canonical_url_reads_as_httpx_reads_it(url):
    plain = wire_url.parse(url)
    assert plain is not None
    assert _parts(plain) == _parts(httpx.URL(url))


@pytest.mark.parametrize("url", NOT_CANONICAL)
def test_anything_httpx_would_rewrite_or_refuse_is_left_to_httpx(url):
    assert wire_url.parse(url) is None


def test_every_normalised_link_of_the_benchmark_corpus_reads_as_httpx_reads_it():
    corpus = build_corpus(60, seed=7)
    base = "http://127.0.0.1:8000"
    urls = {normalize(base + path) for path in corpus.pages}
    urls |= {normalize(base + path) for path in corpus.broken}
    fast = [url for url in urls if url and wire_url.parse(url) is not None]
    assert len(fast) == len([url for url in urls if url])  # all of them take the fast path
    for url in fast:
        assert _parts(wire_url.parse(url)) == _parts(httpx.URL(url))


def test_a_redirect_resolves_against_a_canonical_url_as_against_httpx():
    base = "http://example.com:8080/dir/page.html?x=1"
    for location in ["/abs", "rel", "../up", "?q=2", "https://other.example/", "//cdn.example/x"]:
        assert wire_url.parse(base).join(location) == httpx.URL(base).join(location)


# The pattern parse used before its path and query became one character class
# (with a separate test for "%"): an escape or an allowed character, character
# by character. What each accepts must be the same.
_ESCAPE_BY_ESCAPE = re.compile(
    r"(/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*)"
    r"(\?(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*)?"
)


def test_percent_signs_are_accepted_exactly_where_they_start_an_escape():
    rng = random.Random(20261204)
    alphabet = "%%%%aF09gZ/?.~-"
    for _ in range(20_000):
        tail = "/" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        url = "http://example.com" + tail
        parsed = wire_url.parse(url)
        dotted = any(segment in (".", "..") for segment in tail.split("?")[0].split("/"))
        expected = _ESCAPE_BY_ESCAPE.fullmatch(tail) is not None and not dotted
        assert (parsed is not None) == expected, url
        if parsed is not None:
            assert _parts(parsed) == _parts(httpx.URL(url)), url

"""normalize's shortcut for URLs already in canonical form: every URL it accepts
normalises to exactly what the full parse gives, and everything the full parse
would change or refuse goes to the full parse."""

from __future__ import annotations

import random

import pytest

from benchmarks.corpus import build_corpus
from crawler.page import outlinks_of
from crawler.parse import parse_html
from crawler.urls import InvalidURL, already_normal, normalize, normalize_by_parsing

SCHEMES = ["http", "https", "HTTP", "Https", "ftp", "http:", ""]
HOSTS = [
    "example.com", "www.example.co.uk", "127.0.0.1", "a-b.example", "Example.com", "example.com.", "a..b",
    "127.1", "0x7f.0.0.1", "2130706433", "999.1.1.1", "1.2.3", "xn--caf-dma.example", "café.example", "-a.example",
    "a_b.example", "user@example.com", "user@evil@example.com", "[::1]", "ex%41mple.com", "",
]
PORTS = ["", ":80", ":443", ":8080", ":0", ":65536", ":080", ":8443", ":", ":x"]
SEGMENTS = [
    "p", "1.html", "a-b_c~d", ".", "..", ".hidden", "a.", "%41", "%zz", "a;jsessionid=1", "a;b", "a b", "a|b",
    "a:b@c", "!$&'()*+,=", "caf\u00e9", "A", "", "a\\b", "\t", "x\u0000",
]
TAILS = ["", "#", "#top", "#a b", "#x?y=1", "?", "?q=1", "?PHPSESSID=1&x=2", "?q=%7e", " ", "\n", "#\t"]


def _generated(n: int, seed: int) -> list[str]:
    """URLs from the pieces above, three in four pieces from the first few (plain) ones,
    so that many reach the shortcut and many more differ from canonical by one piece."""
    rng = random.Random(seed)

    def pick(pieces: list[str], plain: int) -> str:
        return rng.choice(pieces[:plain] if rng.random() < 0.75 else pieces)

    urls = []
    for _ in range(n):
        path = "".join("/" + pick(SEGMENTS, 5) for _ in range(rng.randint(0, 4)))
        urls.append(f"{pick(SCHEMES, 2)}://{pick(HOSTS, 4)}{pick(PORTS, 4)}{path}{pick(TAILS, 3)}")
    return urls


def _full(url: str) -> str:
    try:
        return normalize_by_parsing(url, None)
    except InvalidURL as exc:
        return f"InvalidURL: {exc}"


@pytest.mark.parametrize("seed", range(5))
def test_the_shortcut_gives_what_the_full_parse_gives_or_leaves_the_url_to_it(seed):
    taken = 0
    for url in _generated(4000, seed):
        fast = already_normal(url)
        if fast is not None:
            taken += 1
            assert fast == _full(url), url
        try:
            got = normalize(url)
        except InvalidURL as exc:
            got = f"InvalidURL: {exc}"
        assert got == _full(url), url
    assert taken > 200  # the generator does reach the shortcut


@pytest.mark.parametrize("url", [
    "HTTP://example.com/", "http://Example.com/", "http://example.com", "http://example.com:80/",
    "https://example.com:443/", "http://example.com:080/", "http://example.com./", "http://127.1/",
    "http://example.com/a/./b", "http://example.com/a/..", "http://example.com/%7e", "http://example.com/a;jsessionid=9",
    "http://example.com/?q=1", "http://example.com/a b", " http://example.com/", "http://user@example.com/",
])
def test_urls_normalisation_would_change_are_not_taken_by_the_shortcut(url):
    assert already_normal(url) is None


@pytest.mark.parametrize("url, expected", [
    ("http://example.com/", "http://example.com/"),
    ("https://example.com:8443/a/b.html", "https://example.com:8443/a/b.html"),
    ("http://127.0.0.1:8080/p/1.html#content", "http://127.0.0.1:8080/p/1.html"),
    ("http://example.com/a:b@c/!$&'()*+,=#x y", "http://example.com/a:b@c/!$&'()*+,="),
])
def test_canonical_urls_come_back_unchanged_less_their_fragment(url, expected):
    assert already_normal(url) == expected == _full(url)


def test_every_link_of_the_benchmark_corpus_normalises_as_before():
    corpus = build_corpus(60, 7)
    base = "http://127.0.0.1:8080"
    for path, body in sorted(corpus.pages.items()):
        facts = parse_html(body, base + path, http_charset="utf-8")
        links, _ = outlinks_of(facts, base + path)
        assert [link.url for link in links] == [_full(link.url) for link in links]
        for link in facts.links:
            assert normalize(link.url) == _full(link.url)

"""The one-pass parser must give exactly the facts the BeautifulSoup reference gives.

The corpus is the committed fixture pages (real-world-shaped, malformed, odd
encodings) plus large pages generated here, so no megabytes are committed.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from crawler.parse import parse_html
from crawler.parse_bs4 import parse_html_bs4

PAGES = Path(__file__).parent / "fixtures" / "pages"
PAGE_URL = "https://example.com/dir/page.html"
# Charsets a server would have sent in Content-Type for the pages that need one.
HTTP_CHARSETS = {
    "latin1_header_only.html": "iso-8859-1",
    "utf16_bom.html": "iso-8859-1",  # a stale header that the BOM must beat
}
FIXTURES = sorted(p.name for p in PAGES.glob("*.html"))


def _generated() -> dict[str, bytes]:
    rng = random.Random(3)
    words = "crawl audit link page title site fast broken image text".split()

    def para(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    news = "".join(
        f'<li><a href="/story/{i}?src=home">{para(6)}</a> <img src="/t/{i % 50}.jpg"'
        f'{" alt=" + repr(para(2)) if i % 3 else ""}><p>{para(40)}</p></li>'
        for i in range(3000)
    )
    return {
        "gen_news_index_3000_links": f"<title>{para(5)}</title><ul>{news}</ul>".encode(),
        "gen_10000_links": "".join(f'<a href="/p/{i}">Page {i}</a>' for i in range(10_000)).encode(),
        "gen_nested_divs": b"<div>" * 20_000 + b'<a href="/deep">deep</a>' + b"</div>" * 20_000,
        "gen_megabyte_attribute": b'<a href="/x" data-x="' + b"A" * 1_000_000 + b'">big</a>',
        "gen_long_title_and_anchor": b"<title>" + b"word " * 10_000 + b'</title><a href="/z">'
        + b"w\n" * 20_000 + b"</a>",
        "gen_binary_garbage": rng.randbytes(200_000),
        "gen_unclosed_anchors": "".join(f'<a href="/o/{i}">open {i} <b>' for i in range(400)).encode(),
    }


GENERATED = _generated()


def describe_difference(fast, reference) -> str:
    lines = []
    for field in dataclasses.fields(fast):
        mine, theirs = getattr(fast, field.name), getattr(reference, field.name)
        if mine == theirs:
            continue
        if isinstance(mine, tuple) and isinstance(theirs, tuple):
            lines.append(f"{field.name}: {len(mine)} items vs {len(theirs)} in the reference")
            for index, (a, b) in enumerate(zip(mine, theirs, strict=False)):
                if a != b:
                    lines.append(f"  first difference at [{index}]:\n    parse: {a!r}\n    bs4:   {b!r}")
                    break
        else:
            lines.append(f"{field.name}:\n    parse: {mine!r}\n    bs4:   {theirs!r}")
    return "\n".join(lines)


def assert_same_facts(body: bytes, http_charset: str | None = None) -> None:
    fast = parse_html(body, PAGE_URL, http_charset=http_charset)
    reference = parse_html_bs4(body, PAGE_URL, http_charset=http_charset)
    assert fast == reference, "facts differ from the bs4 reference:\n" + describe_difference(
        fast, reference
    )


def test_the_corpus_is_large_and_its_committed_part_small():
    assert len(FIXTURES) + len(GENERATED) >= 40
    assert len(FIXTURES) >= 40
    assert sum((PAGES / name).stat().st_size for name in FIXTURES) < 400 * 1024


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_page_gives_the_same_facts_as_beautifulsoup(name):
    assert_same_facts((PAGES / name).read_bytes(), HTTP_CHARSETS.get(name))


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_page_gives_the_same_facts_as_beautifulsoup(name):
    assert_same_facts(GENERATED[name])


def test_the_difference_report_names_the_field_and_item():
    page = (PAGES / "blog_post.html").read_bytes()
    fast = parse_html(page, PAGE_URL)
    other = dataclasses.replace(fast, links=fast.links[:-1] + (fast.links[0],), title="Other")
    report = describe_difference(fast, other)
    assert "title:" in report and "links: " in report and f"[{len(fast.links) - 1}]" in report

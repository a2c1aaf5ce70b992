"""Lazy-loaded images (URL in ``data-src``, ``srcset`` or behind a ``data:``
placeholder) are images to the alt check. What only a lazy-loading script reads
(``data-*``) is not fetched; ``srcset`` is, as browsers do (tests/crawler/test_srcset.py)."""

from __future__ import annotations

import pytest

from crawler.parse import build_tree
from crawler.types import Image
from tests.crawler.readers import READERS, deep, page_findings

GIF = "data:image/gif;base64,R0lGODlhAQABAAAAACw="


def page(body: str) -> bytes:
    return f"<html><head><title>t</title></head><body><p>text</p>{body}</body></html>".encode()


def test_the_event_path_is_what_deep_pages_take():
    assert build_tree(deep(page("<img data-src='/a.jpg'>"))) is None


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    ("img", "url"),
    [
        ('<img data-src="/a.jpg">', "/a.jpg"),
        ('<img loading="lazy" data-src=" /a.jpg ">', "/a.jpg"),
        ('<img data-lazy-src="/a.jpg">', "/a.jpg"),
        ('<img data-original="/a.jpg">', "/a.jpg"),
        ('<img srcset="/a.jpg 1x, /a@2x.jpg 2x">', "/a.jpg"),
        ('<img srcset=" ,/a.jpg, /b.jpg 2x">', "/a.jpg"),  # HTML drops the URL's trailing commas
        ('<img data-srcset="/a.jpg 480w, /b.jpg 960w">', "/a.jpg"),
        (f'<img src="{GIF}" data-src="/a.jpg">', "/a.jpg"),
        ('<img src="" data-src="/a.jpg">', "/a.jpg"),
        ('<img src="/real.jpg" data-src="/a.jpg">', "/real.jpg"),  # src is what it shows
        ('<img src="/real.jpg" srcset="/a.jpg 2x">', "/real.jpg"),
    ],
)
def test_an_image_is_named_by_its_lazy_url_when_src_gives_none(reader, img, url):
    facts = READERS[reader](page(img))
    assert facts.images == (Image("https://example.com" + url, None),)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("img", "name"), [("<img>", ""), (f'<img src="{GIF}">', GIF), ('<img data-src="  " srcset="">', "")])
def test_an_image_with_no_url_anywhere_is_named_by_its_source_for_the_alt_check(reader, img, name):
    assert READERS[reader](page(img)).images == (Image(name, None),)


@pytest.mark.parametrize("reader", READERS)
def test_lazy_urls_are_not_fetched_as_resources(reader):
    facts = READERS[reader](page(f'<img data-src="/a.jpg"><img data-srcset="/b.jpg 2x"><img src="{GIF}" data-src="/c.jpg">'))
    assert [link.url for link in facts.links if link.tag == "img"] == []
    facts = READERS[reader](page('<img src="/real.jpg" data-src="/a.jpg">'))
    assert [link.url for link in facts.links if link.tag == "img"] == ["https://example.com/real.jpg"]


def test_lazy_images_without_alt_are_reported_and_with_alt_are_not():
    body = page(
        '<img data-src="/a.jpg"><img loading="lazy" data-src="/b.jpg" alt="">'
        f'<img srcset="/c.jpg 1x"><img src="{GIF}" data-src="/d.jpg" alt="Dog">'
    )
    missing = [f.target_url for f in page_findings(body)
               if f.code == "img_alt_missing"]
    assert missing == ["https://example.com/a.jpg", "https://example.com/c.jpg"]

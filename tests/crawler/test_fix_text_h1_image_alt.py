"""An ``<h1>`` holding only a logo image names the page by the image's alt
text, as search engines read it: ``h1_missing`` and ``h1_multiple`` count it."""

from __future__ import annotations

import pytest

from crawler.parse import build_tree
from tests.crawler.readers import READERS, deep, page_findings


def page(body: str) -> bytes:
    return f"<html><head><title>t</title></head><body>{body}<p>text</p></body></html>".encode()


def test_the_event_path_is_what_deep_pages_take():
    assert build_tree(deep(page("<h1>x</h1>"))) is None


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    ("h1", "count"),
    [
        ('<h1><img src="/logo.png" alt="Acme Corp"></h1>', 1),
        ('<h1><a href="/"><img src="/logo.png" alt="Acme"></a></h1>', 1),
        ('<h1> <span><img data-src="/logo.png" alt=" Acme "></span> </h1>', 1),
        ('<h1><img src="/a.png" alt=""><img src="/b.png" alt="Acme"></h1>', 1),
        ('<h1><img src="/logo.png" alt="Acme"></h1><h1>Guide</h1>', 2),  # h1_multiple sees both
        ('<h1><img src="/logo.png" alt=""></h1>', 0),  # decorative: no name
        ('<h1><img src="/logo.png" alt=" \n "></h1>', 0),
        ('<h1><img src="/logo.png"></h1>', 0),
        ('<h1><img src="/logo.png" title="Acme"></h1>', 0),
    ],
)
def test_an_h1_with_only_an_image_counts_when_the_alt_text_is_not_blank(reader, h1, count):
    assert READERS[reader](page(h1)).h1_count == count


def test_a_logo_h1_is_not_reported_missing():
    body = page('<h1><img src="/logo.png" alt="Acme Corp"></h1>')
    codes = [f.code for f in page_findings(body)]
    assert "h1_missing" not in codes
    empty = page('<h1><img src="/logo.png" alt=""></h1>')
    assert "h1_missing" in [f.code for f in page_findings(empty)]


@pytest.mark.parametrize("reader", READERS)
def test_an_image_no_url_names_is_held_to_the_alt_rule_too(reader):
    """Inline data: icons and images without a source are still images a screen reader announces."""
    body = page('<img src="data:image/png;base64,iVBORw0KGgo="><img src=""><img>'
                '<img src="data:image/gif;base64,R0lGOD" alt=""><img src="/ok.png" alt="Fine">')
    facts = READERS[reader](body)
    assert sorted((image.url, image.alt) for image in facts.images) == [
        ("", None), ("data:image/gif;base64,R0lGOD", ""), ("data:image/png;base64,iVBORw0KGgo=", None),
        ("https://example.com/ok.png", "Fine")]


def test_the_alt_check_names_an_inline_image_and_one_without_a_source():
    found = [f for f in page_findings(page('<img src="data:image/png;base64,iVBORw0KGgo="><img>'))
             if f.code == "img_alt_missing"]
    assert sorted(f.message for f in found) == [
        "An image without a source has no alt attribute",
        "An inline image (data:image/png;base64,iVBORw0KGgo=) has no alt attribute"]

"""What <noscript> and <template> hold is none of the page's images, headings, titles or refreshes:
a browser running scripts, and Google, which renders, never shows it. Its links are still followed."""

from __future__ import annotations

import pytest

from tests.crawler.readers import READERS, page_findings

PIXEL = '<noscript><img height="1" width="1" style="display:none" src="https://www.facebook.com/tr?id=1&amp;ev=PageView&amp;noscript=1"></noscript>'


def page(head: str = "", body: str = "") -> bytes:
    return (f'<!doctype html><html lang="en"><head><title>Red shoes</title>{head}'
            f'<meta name="description" content="Red shoes for every day."></head>'
            f'<body>{body}<h1>Red shoes</h1><p>{"words " * 300}</p></body></html>').encode()


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("where", ["head", "body"])
def test_a_tracking_pixel_in_noscript_is_no_image_missing_its_alt_but_still_a_checked_link(reader, where):
    facts = READERS[reader](page(**{where: PIXEL}))
    assert facts.images == ()
    assert "https://www.facebook.com/tr?id=1&ev=PageView&noscript=1" in [link.url for link in facts.links]


@pytest.mark.parametrize("reader", READERS)
def test_headings_and_titles_in_noscript_or_template_are_not_the_pages(reader):
    body = ('<noscript><h1>Please enable JavaScript</h1></noscript>'
            '<template><h1>Sign in</h1><h2>Forgot?</h2><title>Dialog</title></template>')
    facts = READERS[reader](page(body=body))
    assert (facts.h1_count, facts.headings, facts.title_count, facts.title) == (1, (1,), 1, "Red shoes")


@pytest.mark.parametrize("reader", READERS)
def test_a_refresh_for_browsers_without_scripts_is_no_meta_refresh(reader):
    facts = READERS[reader](page(head='<noscript><meta http-equiv="refresh" content="0; url=/no-js/"></noscript>'))
    assert facts.meta_refresh is None
    assert READERS[reader](page(head='<meta http-equiv="refresh" content="5">')).meta_refresh == "5"


@pytest.mark.parametrize("reader", READERS)
def test_an_image_or_heading_beside_the_noscript_still_counts(reader):
    facts = READERS[reader](page(body=f'{PIXEL}<img src="/a.png"><h1>Second</h1>'))
    assert [image.alt for image in facts.images] == [None]
    assert facts.h1_count == 2


def test_a_page_with_the_pixel_and_one_heading_reports_neither_a_missing_alt_nor_two_h1():
    body = "<noscript><h1>Enable JS</h1></noscript><template><title>Dialog</title></template>"
    codes = {finding.code for finding in page_findings(page(head=PIXEL, body=body))}
    assert not codes & {"img_alt_missing", "h1_multiple", "head_tags_multiple", "meta_refresh"}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("attribute", ['shadowrootmode="open"', 'shadowrootmode="closed"', 'shadowroot="open"'])
def test_a_shadow_root_template_holds_the_components_content_which_counts(reader, attribute):
    # Declarative shadow DOM, and how a rendered page's open shadow roots are written out: shown content.
    body = (f'<shop-app><template {attribute}><h1>Shop</h1><img src="/logo.png">'
            f'<p>{"component words " * 20}</p></template></shop-app>'
            '<template><h1>Not shown</h1><p>hidden words</p></template>')
    facts = READERS[reader](page(body=body))
    assert facts.h1_count == 2 and facts.headings == (1, 1)
    assert [image.url.rsplit("/", 1)[1] for image in facts.images] == ["logo.png"]
    plain = READERS[reader](page(body='<shop-app><h1>Shop</h1></shop-app>'))
    assert facts.word_count == plain.word_count + 40

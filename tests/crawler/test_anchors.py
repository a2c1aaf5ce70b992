"""What a fragment must find on its target page, as a browser looks for it, and what a parse keeps of a page's anchors."""

from __future__ import annotations

import pytest

from crawler.anchors import (
    ANCHOR_CHARS_MAX,
    MAX_ANCHORS,
    MAX_FRAGMENTS_PER_TARGET,
    READ_MAX,
    UNSEARCHED_TAGS,
    indicated,
    judged_fragment,
)
from crawler.checks import CheckSettings, PageContext
from crawler.html_rules import INERT_TAGS
from crawler.page import PageOutcome, outlinks_of
from crawler.parse import parse_html
from crawler.parse_bs4 import parse_html_bs4
from crawler.render import Rendered
from crawler.rendered_page import rendered_outcome
from crawler.types import FetchResult


@pytest.mark.parametrize("url, fragment", [
    ("https://h/p#install", "install"),
    ("https://h/p#caf%C3%A9", "caf%C3%A9"),
    ("https://h/p#section:~:text=words", "section"),
    ("https://h/p", None),
    ("https://h/p#", None),
    ("https://h/p#TOP", None),
    ("https://h/p#:~:text=words", None),
    ("https://h/p#!/inbox", None),
    ("https://h/p#/settings", None),
    ("https://h/p#" + "x" * 513, None),
    ("https://h/p#{{ section.slug }}", None),
    ("https://h/p#%7B%7Bslug%7D%7D", None),
    ("https://h/p#${id}", None),
])
def test_only_fragments_that_name_an_element_are_judged(url, fragment):
    assert judged_fragment(url) == fragment


@pytest.mark.parametrize("fragment, found", [
    ("install", True),
    ("Install", False),  # ids match case-sensitively
    ("caf%C3%A9", True),  # percent-decoded as UTF-8, as browsers do
    ("caf%E9", False),  # not UTF-8: compared as written only
    ("%74op", True),  # "top" once decoded
    ("gone", False),
])
def test_a_fragment_is_found_as_written_or_percent_decoded(fragment, found):
    assert indicated(fragment, frozenset({"install", "café"})) is found


def page(body: str) -> bytes:
    return f"<!doctype html><html><head><title>t</title></head><body>{body}</body></html>".encode()


def test_ids_and_anchor_names_are_kept_but_not_other_elements_names():
    body = '<h2 id="a">x</h2><a name="b"></a><input name="c"><p id="">empty</p><div id="a">again</div>'
    assert parse_html(page(body), "https://h/").anchors == ("a", "b")


def test_a_page_nested_past_the_tree_builders_depth_keeps_its_anchors_too():
    # libxml2's tree stops at 256 levels: the event parser reads the page, and must find the same anchors.
    body = "<span>" * 300 + '<b id="deep">x</b>' + "</span>" * 300 + '<a name="end"></a>'
    assert parse_html(page(body), "https://h/").anchors == ("deep", "end")
    assert parse_html_bs4(page(body), "https://h/").anchors == ("deep", "end")


def test_a_page_past_the_anchor_cap_keeps_none_so_no_link_into_it_is_judged():
    ids = [f'<p id="p{i}">x</p>' for i in range(MAX_ANCHORS + 1)]
    assert parse_html(page("".join(ids)), "https://h/").anchors is None
    assert len(parse_html(page("".join(ids[:-1])), "https://h/").anchors) == MAX_ANCHORS


def test_outlinks_carry_each_targets_fragments_once_and_capped():
    links = "".join(f'<a href="/guide#s{i}">s{i}</a><a href="/guide#s{i}">again</a>'
                    for i in range(MAX_FRAGMENTS_PER_TARGET + 5))
    facts = parse_html(page(links + '<a href="/other">no fragment</a><img src="/i.png#x">'), "https://h/")
    outlinks, _ = outlinks_of(facts, "https://h/")
    by_url = {(link.url, link.tag): link.fragments for link in outlinks}
    assert by_url[("https://h/guide", "a")] == tuple(f"s{i}" for i in range(MAX_FRAGMENTS_PER_TARGET))
    assert by_url[("https://h/other", "a")] == ()
    assert by_url[("https://h/i.png", "img")] == ()  # a resource's fragment is no anchor a visitor jumps to


def test_a_page_repeating_ids_past_the_read_cap_keeps_none_on_either_parse_path():
    # A hostile page's million ids must not all become Python strings: reading stops at READ_MAX values.
    body = '<p id="same">x</p>' * READ_MAX
    assert parse_html(page(body), "https://h/").anchors is None
    deep = "<span>" * 300 + body + "</span>" * 300  # past libxml2's tree depth: the event parser's count
    assert parse_html(page(deep), "https://h/").anchors is None
    assert parse_html(page('<p id="same">x</p>' * (READ_MAX - 1)), "https://h/").anchors == ("same",)


def test_a_page_whose_anchors_run_past_the_character_cap_keeps_none():
    long_ids = "".join(f'<p id="{i:0500d}">x</p>' for i in range(ANCHOR_CHARS_MAX // 500 + 1))
    assert parse_html(page(long_ids), "https://h/").anchors is None


def rendered(problem: str = "", html: bytes | None = None) -> PageOutcome:
    raw_html = page('<div id="app"></div><h2 id="from-html">x</h2>')
    result = FetchResult("https://h/", "https://h/", status=200, content_type="text/html", body=raw_html)
    raw = PageOutcome("https://h/", 0, result, parse_html(raw_html, "https://h/"), (), ())
    ctx = PageContext(CheckSettings(), lambda url: url.startswith("https://h/"))
    return rendered_outcome(raw, Rendered("https://h/", html=html, problem=problem), ctx, "https://h")


def test_a_rendered_page_keeps_the_anchors_its_scripts_added_and_a_failed_render_keeps_none():
    # It was rendered for what its scripts add: its HTML's anchors alone would report their ids missing.
    assert rendered(html=page('<div id="app"><h2 id="from-script">x</h2></div>')).facts.anchors == (
        "app", "from-script")
    assert rendered(problem="render_failed").facts.anchors is None


def test_ids_inside_a_template_or_noscript_are_not_anchors_on_either_parse_path():
    # A fragment searches the document: a template's content (a shadow root's too) is outside it, and a
    # noscript's is text where scripts run. The elements' own ids, and an id also outside, still count.
    body = ('<template id="tpl"><h2 id="in-template">x</h2><p id="both">x</p></template>'
            '<noscript id="ns"><p id="in-noscript">x</p><a name="named-in-noscript"></a></noscript>'
            '<div><template shadowrootmode="open"><p id="in-shadow">x</p></template></div>'
            '<template><noscript><p id="nested">x</p></noscript></template><p id="both">x</p><h2 id="out">x</h2>')
    kept = ("both", "ns", "out", "tpl")
    assert parse_html(page(body), "https://h/").anchors == kept
    assert parse_html_bs4(page(body), "https://h/").anchors == kept
    deep = "<span>" * 300 + body + "</span>" * 300  # past libxml2's tree depth: the event parser
    assert parse_html(page(deep), "https://h/").anchors == kept
    assert set(UNSEARCHED_TAGS) == set(INERT_TAGS)  # the parse tells the anchors whether a top holds any


def test_ids_read_inside_a_noscript_count_towards_the_read_cap_on_every_parse_path():
    # The cap bounds what a parse reads, kept or not: a page past it keeps no anchors, whichever path read it.
    body = "<noscript>" + "".join(f'<p id="r{i}">x</p>' for i in range(READ_MAX - 10)) + "</noscript>" + "".join(
        f'<h2 id="s{i}">x</h2>' for i in range(20))
    deep = "<span>" * 300 + body + "</span>" * 300
    assert [parse_html(page(body), "https://h/").anchors, parse_html(page(deep), "https://h/").anchors,
            parse_html_bs4(page(body), "https://h/").anchors] == [None, None, None]
    fewer = "<noscript>" + '<p id="r">x</p>' * 10 + "</noscript>" + '<h2 id="s">x</h2>'
    assert {parse_html(page(fewer), "https://h/").anchors, parse_html(page("<span>" * 300 + fewer), "https://h/").anchors,
            parse_html_bs4(page(fewer), "https://h/").anchors} == {("s",)}

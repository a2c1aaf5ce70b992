"""The auto render rule and the raw-versus-rendered differences, as pure functions."""

import pytest

from crawler.render_rules import DIFFERENCE_CODES, differences, needs_render
from crawler.types import Canonical, Link, PageFacts

ORIGIN = "https://app.example"
SCRIPT = Link(f"{ORIGIN}/app.js", "script")
WORDS = 300


def facts(**fields) -> PageFacts:
    fields.setdefault("word_count", WORDS)
    return PageFacts(**fields)


@pytest.mark.parametrize("body, page, rendered", [
    (b"<noscript>You need to enable JavaScript to run this app.</noscript>", facts(), True),
    (b'<div id="root"></div>', facts(), True),
    (b"<div id='__next'>\n</div>", facts(), True),
    (b"<p>hi</p>", facts(word_count=3, links=(SCRIPT,)), True),  # scripts, no words, no internal link
    (b"<p>hi</p>", facts(word_count=3, links=(SCRIPT, Link(f"{ORIGIN}/about"))), False),
    (b"<p>hi</p>", facts(word_count=3), False),  # no script: a short page, not a shell
    (b'<div id="root"><h1>Server-rendered</h1></div>', facts(), False),
    (b"<noscript><img src=/pixel.gif></noscript>", facts(), False),  # a tracking pixel asks for nothing
    (b'<div id="app"></div>', facts(), True),
    (b'<div class="shell" id="__nuxt"> </div>', facts(), True),
    (b'<div id="___gatsby"></div>', facts(), True),
    (b'<div id=svelte></div>', facts(), True),
    (b'<div id="application"></div>', facts(), False),  # not a framework's mount point
    (b"<p>hi</p>", facts(word_count=49, links=(SCRIPT,)), True),  # just under SHELL_WORDS
    (b"<p>hi</p>", facts(word_count=50, links=(SCRIPT,)), False),
])
def test_auto_renders_what_looks_like_an_app_shell(body, page, rendered):
    assert needs_render("auto", body, page, ORIGIN) is rendered


def test_all_renders_every_parsed_page_and_none_renders_nothing():
    assert needs_render("all", b"<p>text</p>", facts(), ORIGIN)
    assert not needs_render("all", None, None, ORIGIN)  # not HTML that was parsed
    assert not needs_render("none", b'<div id="root"></div>', facts(), ORIGIN)


def test_differences_name_what_javascript_changed():
    raw = facts(title="Loading", word_count=5, robots=frozenset({"noindex"}))
    rendered = facts(title="Home", word_count=400, canonicals=(Canonical(f"{ORIGIN}/"),),
                     links=(Link(f"{ORIGIN}/a"), Link(f"{ORIGIN}/b"), Link("https://other.example/")))
    found = {f.code: f.message for f in differences(raw, rendered, ORIGIN)}
    assert set(found) == DIFFERENCE_CODES
    assert "2 internal links" in found["render_links_added"]
    assert "removes the HTML's noindex" in found["render_noindex_changed"]
    assert differences(rendered, rendered, ORIGIN) == []

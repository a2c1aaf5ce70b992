"""Robots directives written with spaces (crawler.directives.robots_directives): "noindex nofollow"
is two directives, as other crawlers read it, while a ``name: value`` directive and an agent
prefix are read as before."""

import pytest

from crawler.directives import header_robots_directives, robots_directives
from crawler.parse import parse_html
from crawler.parse_bs4 import parse_html_bs4

PAGE = "https://example.com/page.html"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("noindex nofollow", {"noindex", "nofollow"}),
        ("noindex\tnofollow  noarchive", {"noindex", "nofollow", "noarchive"}),
        ("noindex,  nofollow", {"noindex", "nofollow"}),
        ("NOINDEX, NoFollow", {"noindex", "nofollow"}),
        ("NOINDEX NoFollow", {"noindex", "nofollow"}),
        ("max-snippet: 20, noindex", {"max-snippet:20", "noindex"}),
        ("max-image-preview: large, noindex follow", {"max-image-preview:large", "noindex", "follow"}),
        ("unavailable_after: 25 Jun 2010 15:00:00 PST", {"unavailable_after:25 jun 2010 15:00:00 pst"}),
        # A date with a comma is split there, as before: its tail is not cut into names.
        ("unavailable_after: Wed, 06 Nov 2026 08:49:37 GMT",
         {"unavailable_after:wed", "06 nov 2026 08:49:37 gmt"}),
    ],
)
def test_space_separated_directives_are_each_a_directive(value, expected):
    assert robots_directives(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("googlebot: noindex nofollow", {"noindex", "nofollow"}),
        ("googlebot:noindex nofollow", {"noindex", "nofollow"}),
        ("robots: noindex nofollow", {"noindex", "nofollow"}),
        ("otherbot: noindex nofollow", set()),
        ("googlebot: nofollow, otherbot: noindex nosnippet", {"nofollow"}),
        ("otherbot: noindex nofollow, googlebot: noarchive nosnippet", {"noarchive", "nosnippet"}),
        ("googlebot: noindex", {"noindex"}),
    ],
)
def test_an_agent_prefix_holds_for_space_separated_directives(value, expected):
    assert robots_directives(value) == expected


def test_an_agent_prefix_in_one_header_line_does_not_claim_the_next():
    assert header_robots_directives("otherbot: nofollow noarchive\nnoindex nosnippet") == {"noindex", "nosnippet"}


@pytest.mark.parametrize("parse", [parse_html, parse_html_bs4])
def test_a_meta_robots_with_spaces_makes_the_page_noindex(parse):
    facts = parse(b'<html><head><meta name="robots" content="noindex nofollow"></head></html>', PAGE)
    assert facts.robots == {"noindex", "nofollow"}

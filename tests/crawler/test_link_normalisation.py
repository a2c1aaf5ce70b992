"""normalize_link: a page's links as the crawl keys them."""

import pytest

from crawler.page import normalize_link
from crawler.urls import InvalidURL


def test_a_link_that_needs_normalising_is_normalised():
    url = "HTTP://Cache-Test.example:80/a/./b/../c.html#frag"
    assert normalize_link(url, "http://cache-test.example/") == "http://cache-test.example/a/c.html"
    assert normalize_link(url, "http://cache-test.example/") == "http://cache-test.example/a/c.html"


def test_relative_links_resolve_against_the_base():
    assert normalize_link("../x.html", "http://cache-test.example/a/b/") == "http://cache-test.example/a/x.html"


def test_an_absolute_link_without_a_host_is_invalid_not_a_path_of_the_page():
    with pytest.raises(InvalidURL):
        normalize_link("https:///x", "http://cache-test.example/a/")

"""The per-process cache of normalised absolute links: right answers, one string per normal URL."""

from crawler.page import normalize_link


def test_an_already_normal_link_is_cached_as_the_same_string_not_an_equal_copy():
    url = "".join(["http://cache-test.example/p/", "1.html"])  # a fresh string object
    assert normalize_link(url, "http://cache-test.example/") is url


def test_a_link_that_needs_normalising_is_cached_normalised():
    url = "HTTP://Cache-Test.example:80/a/./b/../c.html#frag"
    assert normalize_link(url, "http://cache-test.example/") == "http://cache-test.example/a/c.html"
    assert normalize_link(url, "http://cache-test.example/") == "http://cache-test.example/a/c.html"


def test_relative_links_resolve_against_the_base():
    assert normalize_link("../x.html", "http://cache-test.example/a/b/") == "http://cache-test.example/a/x.html"

"""Which titles say "not found" (crawler.soft404.says_not_found): a title part that is only the
phrase counts; one where the phrase opens or sits in a longer headline does not."""

import pytest

from crawler.soft404 import says_not_found


@pytest.mark.parametrize("title", [
    "Page not found | Shop", "404 Not Found", "404", "Error 404", "Not Found", "404 - Page not found",
    "Page Not Found – Acme", "Oops! That page can’t be found.", "Oops! That page doesn't exist",
    "File not found", "Page not found – Site", "Page not found at /x", "Page not found at /a:b",
    "Shop | Page Not Found", "Error 404: Page not found", "Acme: Page not found",
    "404: This page could not be found", "404: NOT_FOUND", "HTTP Error 404 · Acme",
    "Sorry, the page you requested does not exist", "Not Found (404) — Acme",
])
def test_a_title_made_of_the_not_found_phrase_says_not_found(title):
    assert says_not_found(title) is True


@pytest.mark.parametrize("title", [
    "404 Error Page Design Ideas | Blog", "404 pages that convert – Acme",
    "Error 404: Best practices for custom 404 pages", "Not Found Records – Label", "Not Found: a novel",
    "How to fix 404 errors", "Room 404", "command not found in bash", "Nike Air Max 404",
    "Found: the 4040 series", "Why a page no longer exists – Blog", "Error | Acme", "", "Example shop",
])
def test_a_title_where_the_phrase_opens_or_sits_in_a_headline_does_not(title):
    assert says_not_found(title) is False

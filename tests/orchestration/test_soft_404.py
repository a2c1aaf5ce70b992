"""Soft 404s (CHECKS, stretch): a page that answers 200 with the site's "not found" page, found by
asking the site for a URL that cannot exist, or whose title says it was not found."""

import re

import pytest
from werkzeug.wrappers import Response

from audits.inline import run_audit_inline
from crawler.soft404 import says_not_found
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

NOT_FOUND = "<!doctype html><title>Example shop</title><h1>Sorry</h1><p>We looked everywhere for that.</p>"


@pytest.mark.parametrize(("title", "says"), [
    ("404 Not Found", True), ("Page not found – Example", True), ("Oops! That page doesn’t exist", True),
    ("Error 404", True), ("Shop | Page Not Found", True), ("404 - Page not found", True),
    ("Example shop", False), ("Found: the 4040 series", False), ("", False),
    # Titles that only mention a 404 or "not found" are about something else.
    ("How to fix 404 errors in WordPress", False), ("Nike Air Max 404", False), ("Room 404 | Hotel", False),
    ('Fixing "command not found" in bash', False),
])
def test_a_title_that_says_not_found(title, says):
    assert says_not_found(title) is says


def site(httpserver, *, soft: bool) -> list[str]:
    """A shop whose unknown URLs answer ``NOT_FOUND`` with 200 (``soft``) or 404; the paths asked, in order."""
    asked = []
    pages = {
        "/": '<title>Home of the shop</title><a href="/shoes">shoes</a><a href="/gone">gone</a>'
             '<a href="/old-offer">old offer</a>',
        "/shoes": "<title>Shoes of the shop</title><p>Shoes.</p>",
        "/old-offer": "<title>Page not found - Example shop</title><p>Try the home page.</p>",
    }

    def answer(request):
        asked.append(request.path)
        if request.path in pages:
            return Response(pages[request.path], content_type="text/html")
        return Response(NOT_FOUND, status=200 if soft else 404, content_type="text/html")

    httpserver.expect_request(re.compile(".*")).respond_with_handler(answer)
    return asked


def catch_all(httpserver, home: str, pages: dict[str, str]):
    """A site answering every path but ``pages`` with ``home`` (200): a catch-all rewrite, an app's shell."""
    httpserver.expect_request(re.compile(".*")).respond_with_handler(
        lambda request: Response(pages.get(request.path, home), content_type="text/html"))


def crawled(owner, httpserver, start: str = "/"):
    audit = make_audit(owner, start_url=httpserver.url_for(start), allow_private=True, check_external=False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    return audit


def test_pages_that_answer_with_the_sites_not_found_page_or_say_not_found_are_soft_404s(
        owner, fast_settings, httpserver):
    asked = site(httpserver, soft=True)
    audit = crawled(owner, httpserver)
    found = dict(audit.issues.filter(code="soft_404").values_list("url", "message"))
    assert found == {
        httpserver.url_for("/gone"): "Same text as the page this site answers, with 200, for a URL that does not exist",
        httpserver.url_for("/old-offer"): "Answered 200, but its title says it was not found: "
                                          "“Page not found - Example shop”",
    }
    probes = [path for path in asked if path.startswith("/siteward-")]
    assert len(probes) == 1 and probes[0].endswith("-does-not-exist")
    assert not audit.pages.filter(url__contains="/siteward-").exists()  # asked, never stored as a page


def test_a_site_that_answers_404_for_what_does_not_exist_has_only_the_pages_that_say_so(
        owner, fast_settings, httpserver):
    site(httpserver, soft=False)
    audit = crawled(owner, httpserver)
    assert audit.not_found_hash == ""
    assert list(audit.issues.filter(code="soft_404").values_list("url", flat=True)) == [
        httpserver.url_for("/old-offer")]
    assert audit.issues.filter(code="http_4xx", url=httpserver.url_for("/gone")).exists()


def test_a_site_that_answers_what_does_not_exist_with_its_home_page_flags_no_page_by_its_text(
        owner, fast_settings, httpserver):
    # A catch-all rewrite (an app's shell): the home page is no "not found" page, nor are its copies.
    catch_all(httpserver, '<title>Home of the shop</title><p>Welcome.</p><a href="/shoes">shoes</a>'
                          '<a href="/copy">copy</a>', {"/shoes": "<title>Shoes of the shop</title><p>Shoes.</p>"})
    audit = crawled(owner, httpserver)
    assert audit.not_found_hash == ""  # the probe's 200 page was the start page: nothing to match
    assert not audit.issues.filter(code="soft_404").exists()
    assert audit.issues.filter(code="duplicate_content", url=httpserver.url_for("/copy")).exists()


def test_below_a_start_url_deeper_in_the_site_the_home_page_a_catch_all_serves_is_no_soft_404(
        owner, fast_settings, httpserver):
    catch_all(httpserver, '<title>Home of the shop</title><p>Welcome.</p><a href="/blog/">blog</a>',
              {"/blog/": '<title>Blog of the shop</title><p>Posts.</p><a href="/">home</a>'})
    audit = crawled(owner, httpserver, "/blog/")
    assert audit.not_found_hash != ""  # the probe got the home page, which is not the start page
    assert audit.pages.filter(url=httpserver.url_for("/"), status_code=200).exists()
    assert not audit.issues.filter(code="soft_404").exists()

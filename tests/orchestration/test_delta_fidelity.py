"""Delta mode reuses a page only when this answer proves it is the one stored, and keeps all the body said."""

from __future__ import annotations

from email.utils import formatdate, parsedate_to_datetime

import pytest
from werkzeug.wrappers import Response

from audits.crawl.reuse import revive, source_of
from audits.crawl.rows import head_facts
from audits.crawl.setup import crawl_setup
from audits.models import Audit, Page
from crawler.page import PageOutcome
from crawler.revalidate import KEPT_HEADERS
from crawler.types import FetchResult, PageFacts
from tests.factories import make_audit, make_page
from tests.scripted_site import Answer, ScriptedSite

from .test_delta_reuse import first_delta_full, html, issues, row

pytestmark = pytest.mark.django_db


def test_a_304_to_a_request_that_sent_no_validator_is_not_taken_for_unchanged(owner, fast_settings):
    """A page whose noindex came by header is asked without validators; a broken server's 304 proves nothing."""
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>'),
                                 headers={"X-Robots-Tag": "noindex"})

        def broken_server():
            web.pages["/a"] = Answer(b"", status=304)  # "not modified" to every request

        first, delta, full = first_delta_full(owner, web, broken_server)
    reused, fetched = row(delta, web, "/a"), row(full, web, "/a")
    assert row(first, web, "/a").status_code == 200
    assert reused.unchanged_since is None
    assert (reused.status_code, reused.title, reused.robots) == (fetched.status_code, fetched.title, fetched.robots)
    assert reused.status_code == 304


class NotNewerSite(ScriptedSite):
    """Answers If-Modified-Since as Apache does: 304 whenever the page is not newer than the date asked about."""

    def _answer(self, request):
        page, asked = self.pages.get(request.path), request.headers.get("If-Modified-Since")
        modified = page.headers.get("Last-Modified") if page else None
        if modified and asked and parsedate_to_datetime(modified) <= parsedate_to_datetime(asked):
            with self._lock:
                self.requests[request.path] += 1
            return _Repeating304(status=304, headers={"Last-Modified": modified})
        return super()._answer(request)


class _Repeating304(Response):
    """A 304 that repeats Last-Modified, as Apache and nginx do; werkzeug drops it from a 304."""

    def get_wsgi_headers(self, environ):
        headers = super().get_wsgi_headers(environ)
        headers["Last-Modified"] = self.headers["Last-Modified"]
        return headers


def test_a_304_naming_an_older_copy_than_the_stored_one_is_read_again(owner, fast_settings):
    """A page rolled back to an older file: not modified since the date asked, but not the stored version."""
    with NotNewerSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a, the new text", '<a href="/">home</a>'),
                                 headers={"Last-Modified": formatdate(1_790_000_100, usegmt=True)})

        def rolled_back():
            web.pages["/a"] = Answer(html("Page a, the old text", '<a href="/">home</a>'),
                                     headers={"Last-Modified": formatdate(1_790_000_000, usegmt=True)})

        first, delta, full = first_delta_full(owner, web, rolled_back)
    reused = row(delta, web, "/a")
    assert row(first, web, "/a").title == "Page a, the new text"
    assert reused.unchanged_since is None
    assert (reused.status_code, reused.title) == (200, "Page a, the old text") == (row(full, web, "/a").status_code,
                                                                                   row(full, web, "/a").title)


def test_a_304_repeating_the_stored_date_in_another_spelling_is_still_unchanged(owner, fast_settings):
    """The same instant written another way (RFC 850 instead of IMF-fixdate) names the same version."""
    with NotNewerSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>'),
                                 headers={"Last-Modified": "Sun, 21 Sep 2026 12:53:20 GMT"})

        def respelt():
            web.pages["/a"].headers["Last-Modified"] = "Sunday, 21-Sep-26 12:53:20 GMT"

        first, delta, _ = first_delta_full(owner, web, respelt)
    assert row(delta, web, "/a").unchanged_since == first.pk


def test_a_reused_page_keeps_the_hreflang_findings_about_its_own_tags(owner, fast_settings):
    """An invalid language code and no x-default are the page's own; finalize judges only the targets."""
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>',
                                      head='<link rel="alternate" hreflang="english" href="/a">'),
                                 headers={"ETag": '"a1"'})
        first, delta, full = first_delta_full(owner, web, lambda: None)
    assert ("hreflang_error", "warning") in issues(full, web, "/a")
    assert row(delta, web, "/a").unchanged_since == first.pk
    assert issues(delta, web, "/a") == issues(full, web, "/a")


@pytest.mark.parametrize(("served", "served_now"), [
    ("text/html; charset=windows-1252", "text/html; charset=utf-8"),
    ("text/html; charset=utf-8", "text/plain; charset=utf-8"),
], ids=["charset", "type"])
def test_the_same_bytes_served_as_another_type_or_charset_are_read_again(owner, fast_settings, served, served_now):
    """A server that never answers 304: the body hash alone would call the page unchanged."""
    body = html("Caf\xe9 page of the delta test site", '<a href="/">home</a>').encode("windows-1252")
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(body, ctype=served, honour=False)

        def served_otherwise():
            web.pages["/a"].ctype = served_now

        first, delta, full = first_delta_full(owner, web, served_otherwise)
    reused, fetched = row(delta, web, "/a"), row(full, web, "/a")
    assert reused.unchanged_since is None
    assert (reused.content_type, reused.title) == (fetched.content_type, fetched.title)
    assert (reused.content_type, reused.title) != (row(first, web, "/a").content_type, row(first, web, "/a").title)


def test_a_page_served_unchanged_with_the_same_bytes_and_type_is_still_reused(owner, fast_settings):
    with ScriptedSite() as web:
        web.pages["/"] = Answer(html("Home of the delta test site", '<a href="/a">a</a>'))
        web.pages["/a"] = Answer(html("Page a of the delta test site", '<a href="/">home</a>'),
                                 ctype="text/html; charset=utf-8", honour=False)
        first, delta, _ = first_delta_full(owner, web, lambda: None)
    assert row(delta, web, "/a").unchanged_since == first.pk


@pytest.mark.parametrize("differs", [{"render": "all"}, {"user_agent": "OtherBot/1.0"}], ids=["render", "agent"])
def test_a_delta_read_another_way_than_its_source_reuses_nothing(owner, differs):
    """A rendered page's facts are the browser's; a server may vary a page by user agent."""
    source = make_audit(owner, status=Audit.Status.COMPLETED, origin="https://shop.example")
    same = make_audit(owner, mode=Audit.Mode.DELTA, source=source, origin="https://shop.example")
    other = make_audit(owner, mode=Audit.Mode.DELTA, source=source, origin="https://shop.example", **differs)
    assert source_of(same) == source.pk
    assert source_of(other) is None


SECURE = {"strict-transport-security": "max-age=63072000", "x-content-type-options": "nosniff",
          "content-security-policy": "default-src 'self'"}


@pytest.mark.parametrize(("sent", "missing"), [
    (SECURE, None),
    ({"x-content-type-options": "nosniff"}, "Strict-Transport-Security, Content-Security-Policy or X-Frame-Options"),
], ids=["all-sent", "some-missing"])
def test_a_page_reused_on_a_304_keeps_the_security_headers_its_stored_answer_had(owner, sent, missing):
    """A 304 need not repeat them (RFC 9110 15.4.5): the stored answer's stand, freshened by the 304's."""
    url = "https://shop.example/a"
    source = make_audit(owner, status=Audit.Status.COMPLETED, start_url="https://shop.example/",
                        origin="https://shop.example")
    delta = make_audit(owner, mode=Audit.Mode.DELTA, source=source, start_url="https://shop.example/",
                       origin="https://shop.example")
    # The row a parse of the page stored: the writer keeps which of those headers the 200 had.
    make_page(source, url, etag='"a1"', body_hash="b" * 32,
              head_facts=head_facts(PageFacts(), url, kept=[name for name in KEPT_HEADERS if name in sent]))
    answer = FetchResult(url, url, status=304, headers={"etag": '"a1"'})
    revived, _ = revive(delta.pk, source.pk, [PageOutcome(url, 1, answer, None, (), (), unchanged=True)],
                        crawl_setup(delta))
    found = {f.code: f.message for f in revived[0].findings}
    assert found.get("security_headers_missing") == (f"Missing {missing}" if missing else None)
    assert Page.objects.filter(audit=source).count() == 1

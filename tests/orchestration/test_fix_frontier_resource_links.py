"""A URL first offered as a resource (an <iframe>, an <img>) and linked by an <a> is crawled as a page,
whichever offer came first and whatever its resource check's state: found by real crawls of a loopback site."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Page
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db


def page(title: str, body: str = "") -> Answer:
    return Answer(f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>")


def links(*paths: str) -> str:
    return "".join(f'<a href="{path}">{path}</a> ' for path in paths)


def crawl(site: ScriptedSite, owner, **fields) -> Audit:
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, **fields)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def assert_crawled_as_page(audit: Audit, site: ScriptedSite, path: str, depth: int) -> None:
    row = audit.pages.get(url=site.url(path))
    assert (row.kind, row.title, row.depth) == (Page.Kind.PAGE, "Widget", depth)
    # Parsed as a page: its own link was followed.
    assert audit.pages.filter(url=site.url("/from-widget"), kind=Page.Kind.PAGE).exists()


def test_an_embedded_page_checked_before_a_link_reaches_it_is_crawled_as_a_page(owner, fast_settings):
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/": page("Home", '<iframe src="/widget.html"></iframe>' + links("/a")),
            "/a": page("A", links("/b")),
            "/b": page("B", links("/widget.html")),
            "/widget.html": page("Widget", links("/from-widget")),
            "/from-widget": page("From the widget"),
        })
        audit = crawl(site, owner)
    assert_crawled_as_page(audit, site, "/widget.html", depth=3)


def test_an_embedded_page_a_running_chunk_is_checking_when_a_link_reaches_it_is_crawled_as_a_page(
        owner, fast_settings):
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/": page("Home", '<iframe src="/widget.html"></iframe>' + links("/a")),
            "/a": page("A", links("/widget.html")),
            # Slower than a sub-batch's flush: /a's links are admitted while the check is in flight.
            "/widget.html": Answer(page("Widget", links("/from-widget")).body, delay=2.0),
            "/from-widget": page("From the widget"),
        })
        audit = crawl(site, owner)
    assert_crawled_as_page(audit, site, "/widget.html", depth=2)


def test_a_page_that_embeds_and_links_the_same_url_has_it_crawled_as_a_page(owner, fast_settings):
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/": page("Home", '<iframe src="/widget.html"></iframe>' + links("/widget.html")),
            "/widget.html": page("Widget", links("/from-widget")),
            "/from-widget": page("From the widget"),
        })
        audit = crawl(site, owner)
    assert_crawled_as_page(audit, site, "/widget.html", depth=1)


def test_an_embedded_url_linked_only_past_max_depth_stays_a_resource(owner, fast_settings):
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/": page("Home", '<img src="/picture.html" alt="">' + links("/a")),
            "/a": page("A", links("/picture.html")),
            "/picture.html": page("Widget", links("/from-widget")),
            "/from-widget": page("From the widget"),
        })
        audit = crawl(site, owner, max_depth=1)
    assert audit.pages.get(url=site.url("/picture.html")).kind == Page.Kind.RESOURCE
    assert not audit.pages.filter(url=site.url("/from-widget")).exists()

"""Duplicate titles, descriptions and content are judged among the pages a search
engine would index: not a redirect and not
a page that names another URL as its canonical. Found by finalize after a real
crawl of a loopback site."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db

DUPLICATE_CODES = ("title_duplicate", "meta_description_duplicate", "duplicate_content")


def page(title: str, text: str, *, head: str = "", links: tuple[str, ...] = ()) -> str:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return (f'<!doctype html><html lang="en"><head><title>{title}</title>'
            f'<meta name="description" content="{title}: a description long enough to pass every length check.">'
            f"{head}</head><body><h1>{title}</h1><p>{text}</p>{anchors}</body></html>")


def crawl(owner, build) -> tuple[ScriptedSite, Audit]:
    """Audit a loopback site whose pages ``build(site)`` gives once its port is known."""
    site = ScriptedSite()
    with site:
        site.pages.update(build(site))
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return site, audit


def duplicates(audit: Audit) -> set[tuple[str, str]]:
    return set(Issue.objects.filter(audit=audit, code__in=DUPLICATE_CODES).values_list("code", "url"))


def test_a_redirect_and_the_page_it_lands_on_are_not_duplicates_of_each_other(owner, fast_settings):
    site, audit = crawl(owner, lambda site: {
        "/": Answer(page("Home of the duplicate test site", "home " * 30, links=("/about", "/about/"))),
        "/about": Answer(status=301, headers={"Location": "/about/"}),
        "/about/": Answer(page("About the duplicate test site", "about " * 30)),
    })
    assert audit.pages.filter(url=site.url("/about"), redirect_count=1).exists()
    assert duplicates(audit) == set()


def test_pages_canonicalised_to_one_url_are_not_duplicates_but_true_twins_are(owner, fast_settings):
    def build(site):
        listing = page("Every product in the shop", "product " * 30,
                       head=f'<link rel="canonical" href="{site.url("/list")}">')
        twin = page("Twin page of the duplicate test site", "twin " * 30)
        return {
            "/": Answer(page("Home of the duplicate test site", "home " * 30,
                             links=("/list", "/list?sort=price", "/list?sort=name", "/twin-1", "/twin-2"))),
            "/list": Answer(listing),  # also its ?sort= variants: the site answers by path
            "/twin-1": Answer(twin), "/twin-2": Answer(twin),
        }

    site, audit = crawl(owner, build)
    assert duplicates(audit) == {(code, site.url(path)) for code in DUPLICATE_CODES for path in ("/twin-1", "/twin-2")}

"""Sitemap-only URLs under a page budget: a share of max_pages is kept for them,
so orphan and bad-sitemap-URL checks still report when links alone would fill it."""

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, FrontierURL, Issue
from tests.editable_site import EditableSite
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

LISTED = 300
ORPHANS = [f"/orphan/{n}" for n in range(1, 6)]
GONE = "/orphan/gone"  # in the sitemap, answers 404


def _page(title: str, links: list[str] = ()) -> str:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return f"<!doctype html><html lang=en><head><title>{title}</title></head><body><h1>{title}</h1>{anchors}</body></html>"


class SitemapSite(EditableSite):
    """A home page, one listing page of LISTED items, and a sitemap naming the home page and orphans."""

    def __init__(self):
        super().__init__(sitemap=True)
        self.set(**{"/": _page("Home", ["/list"]),
                    "/list": _page("Listing", [f"/item/{n}" for n in range(1, LISTED + 1)])})
        self.pages.update({f"/item/{n}": _page(f"Item {n}", ["/"]).encode() for n in range(1, LISTED + 1)})
        self.pages.update({path: _page(f"Orphan {path}").encode() for path in ORPHANS})

    def answer(self, path: str):
        if path == "/sitemap.xml":
            self.requests[path] += 1
            locs = "".join(f"<url><loc>{self.base}{p}</loc></url>" for p in ["/", *ORPHANS, GONE])
            return 200, "application/xml", (
                '<?xml version="1.0" encoding="UTF-8"?>'
                f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>').encode()
        return super().answer(path)


@pytest.fixture
def site():
    with SitemapSite() as fixture:
        yield fixture


@pytest.mark.parametrize(("max_pages", "reserve"), [(100, 20), (1000, 100), (1001, 101), (30, 15), (5, 2), (0, 0)])
def test_the_sitemap_reserve_is_a_tenth_at_least_twenty_at_most_half_the_budget(max_pages, reserve):
    assert FrontierURL.objects.sitemap_reserve(max_pages) == reserve


def test_sitemap_only_urls_are_fetched_when_one_listing_page_would_fill_the_budget(owner, site, fast_settings):
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=100, max_depth=5)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    for path in [*ORPHANS, GONE]:
        assert site.requests[path] == 1, f"{path} was not fetched"
    orphans = set(Issue.objects.filter(audit=audit, code="orphan_page").values_list("url", flat=True))
    assert {site.url(path) for path in ORPHANS} <= orphans
    assert Issue.objects.filter(audit=audit, code="sitemap_bad_url", url=site.url(GONE)).exists()
    # The budget holds exactly; links took what the few sitemap-only URLs left.
    assert audit.pages_crawled <= 100
    assert audit.pages.filter(kind="page").count() == 100
    assert sum(site.requests[f"/item/{n}"] for n in range(1, LISTED + 1)) == 100 - 2 - len(ORPHANS) - 1


def test_orphans_of_a_crawl_cut_by_the_page_limit_are_notices_that_say_so(owner, site, fast_settings):
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=100, max_depth=5)
    run_audit_inline(audit.pk)
    orphans = Issue.objects.filter(audit=audit, code="orphan_page", url__in=[site.url(p) for p in ORPHANS])
    assert orphans.count() == len(ORPHANS)
    # Over 200 listed items were never fetched: any of them might link to the sitemap pages.
    for severity, message in orphans.values_list("severity", "message"):
        assert severity == "notice"
        assert "page limit left" in message and "linked page(s) unfetched" in message


def test_orphans_of_a_crawl_that_read_every_linked_page_are_warnings(owner, site, fast_settings):
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=1000, max_depth=5)
    run_audit_inline(audit.pk)
    orphans = Issue.objects.filter(audit=audit, code="orphan_page", url__in=[site.url(p) for p in ORPHANS])
    assert orphans.count() == len(ORPHANS)
    assert set(orphans.values_list("severity", "message")) == {
        ("warning", "Listed in the sitemap but no crawled page links to it")}

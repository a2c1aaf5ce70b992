"""Sitemap-only pages wait while link-found pages are still being crawled, in this chunk or one beside it
(several clusters on PostgreSQL): crawled first, at max_depth, their links would go nowhere and the page
budget would go to them before the pages the links reach."""

from __future__ import annotations

import pytest

from audits.crawl.progress import has_work
from audits.models import Audit, ChunkLease, FrontierURL, Page
from crawler.urls import url_hash
from tests.factories import SITE, make_audit

pytestmark = pytest.mark.django_db


def frontier(audit: Audit, path: str, **fields) -> FrontierURL:
    url = f"{SITE}{path}"
    return FrontierURL.objects.create(audit=audit, url=url, url_hash=url_hash(url), kind=Page.Kind.PAGE, **fields)


def test_a_chunk_beside_one_crawling_linked_pages_leaves_the_sitemap_only_pages_until_it_ends(owner):
    audit = make_audit(owner, max_pages=1000, max_depth=5, status=Audit.Status.RUNNING)
    crawling = ChunkLease.objects.create(audit=audit, number=1, state=ChunkLease.State.LEASED)
    linked = frontier(audit, "/docs/", depth=1, linked=True, state=FrontierURL.State.LEASED, chunk=1)
    listed = [frontier(audit, f"/only-in-sitemap/{n}", depth=5, in_sitemap=True) for n in range(5)]
    beside = ChunkLease.objects.create(audit=audit, number=2, state=ChunkLease.State.LEASED)

    assert FrontierURL.objects.lease_next(beside, 10, budget=100) == []
    assert not has_work(audit)  # no chunk is scheduled to lease nothing

    # The linked page is written and its chunk ends: now links have nothing more to give.
    FrontierURL.objects.filter(pk=linked.pk).update(state=FrontierURL.State.DONE)
    ChunkLease.objects.filter(pk=crawling.pk).update(state=ChunkLease.State.DONE)
    assert has_work(audit)
    assert sorted(FrontierURL.objects.lease_next(beside, 10, budget=100)) == sorted(row.pk for row in listed)


def test_a_linked_page_left_leased_by_a_chunk_no_longer_open_holds_nothing_back(owner):
    audit = make_audit(owner, max_pages=1000, max_depth=5, status=Audit.Status.RUNNING)
    ChunkLease.objects.create(audit=audit, number=1, state=ChunkLease.State.ABANDONED)
    frontier(audit, "/docs/", depth=1, linked=True, state=FrontierURL.State.LEASED, chunk=1)
    listed = frontier(audit, "/only-in-sitemap/0", depth=5, in_sitemap=True)
    assert has_work(audit)
    lease = ChunkLease.objects.create(audit=audit, number=2, state=ChunkLease.State.LEASED)
    assert FrontierURL.objects.lease_next(lease, 10, budget=100) == [listed.pk]

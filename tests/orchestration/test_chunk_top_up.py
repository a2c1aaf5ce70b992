"""A chunk tops up its lease while its last URLs run, so fetching does not stop between chunks;
each top-up is fenced and bounded like a lease, and never reaches deeper pages than the chunk began with."""

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from audits.crawl.chunk import claim, lease_items, run_chunk
from audits.crawl.setup import crawl_setup
from audits.crawl.writer import (
    NO_PAGES,
    TOP_UP_URLS_PER_PAGE,
    AuditStopped,
    ChunkWriter,
    Item,
    LeaseLost,
    spread_checks,
)
from audits.inline import run_audit_inline
from audits.models import Audit, ChunkLease, FrontierQuerySet, FrontierURL, Page
from tests.factories import make_audit

from .grid_site import GridSite
from .starting import started

pytestmark = pytest.mark.django_db


def test_a_crawl_tops_up_its_chunks_and_still_stores_every_page_once_at_its_click_depth(
        owner, fast_settings, monkeypatch):
    leases = []  # (limit, page depth cap, depths of the pages it leased)
    lease_next = FrontierQuerySet.lease_next

    def spy(self, lease, limit, *, budget, page_depth_cap=None, url_limit=None):
        ids = lease_next(self, lease, limit, budget=budget, page_depth_cap=page_depth_cap, url_limit=url_limit)
        depths = list(FrontierURL.objects.filter(id__in=ids, kind=Page.Kind.PAGE).values_list("depth", flat=True))
        leases.append((len(ids), page_depth_cap, depths))
        return ids

    monkeypatch.setattr(FrontierQuerySet, "lease_next", spy)
    # The chunk count below has no slack: a chunk that hit the soft deadline on
    # a stalled machine would add one. This test is about top-ups, not deadlines.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SOFT_DEADLINE": 60.0}
    # 120 pages: click depths 0-6 (a seventh level would trip the crawler-trap guard on /p/{n}).
    with GridSite(pages=120) as site:
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, max_pages=500,
                            max_depth=10)
        run_audit_inline(audit.pk)
        audit.refresh_from_db()
        assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
        stored = {p.url.removeprefix(site.url("").rstrip("/")): p for p in audit.pages.all()}
        assert set(stored) == site.page_paths()
        for i in range(1, site.pages + 1):
            assert stored[site.path(i)].depth == int(math.log2(i)), site.path(i)
        assert all(site.hits(path) == 1 for path in site.page_paths() if not path.startswith("/missing"))

    size = fast_settings.SITEWARD["CHUNK_SIZE"]
    top_ups = [lease for lease in leases if lease[1] is not None]
    assert top_ups, "no chunk topped up"
    # Every lease, first or top-up, is bounded: a first lease by CHUNK_SIZE, a
    # top-up by CHUNK_SIZE pages and TOP_UP_URLS_PER_PAGE times that in all.
    assert all(count <= size for count, cap, _ in leases if cap is None)
    assert all(count <= size * TOP_UP_URLS_PER_PAGE and len(depths) <= size for count, _, depths in top_ups)
    assert all(depth <= cap for _, cap, depths in top_ups for depth in depths)
    # 132 URLs at 10 a lease were 17 chunks or more; topped up, a chunk lasts a click depth or more.
    chunks = ChunkLease.objects.filter(audit=audit).count()
    assert chunks < math.ceil(len(site.page_paths()) / size)
    assert chunks <= 1 + int(math.log2(site.pages)) + 1


def _holding_half_a_level(owner, site):
    """Start (the start page) and chunks 1-3 (click depths 1-3, a chunk each) run; chunk 4
    claimed, holding 10 of the 17 URLs at depth 4 (pages 16-31 and one broken link)."""
    audit, dispatcher = started(owner, site)
    for number in range(1, 4):
        assert run_chunk(audit.pk, number, dispatcher) == "done"
    held = claim(audit.pk, 4)
    items = lease_items(audit, held)
    assert {item.depth for item in items} == {4} and len(items) == 10
    writer = ChunkWriter(audit, held, crawl_setup(audit))
    writer.hold(items)
    return audit, held, items, writer


def _expire(lease) -> None:
    ChunkLease.objects.filter(pk=lease.pk).update(leased_until=timezone.now() - timedelta(seconds=1))


def _pending(audit) -> int:
    return FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING).count()


def test_a_top_up_takes_the_rest_of_the_level_and_a_retry_re_receives_it(owner, grid_site, fast_settings):
    audit, held, items, writer = _holding_half_a_level(owner, grid_site)
    more = writer.top_up()
    assert len(more) == 7 and {item.depth for item in more} == {4}
    assert not {i.url for i in more} & {i.url for i in items}
    assert writer.top_up() == []  # nothing that shallow is left: the chunk would end here
    assert ChunkLease.objects.get(pk=held.pk).url_count == len(items) + len(more)
    _expire(held)
    retry = claim(audit.pk, 4)
    assert sorted(i.url for i in lease_items(audit, retry)) == sorted(i.url for i in items + more)


def test_a_zombie_cannot_top_up(owner, grid_site, fast_settings):
    audit, held, _, zombie = _holding_half_a_level(owner, grid_site)
    _expire(held)
    assert claim(audit.pk, 4) is not None  # another worker took it over
    pending = _pending(audit)
    with pytest.raises(LeaseLost):
        zombie.top_up()
    assert _pending(audit) == pending


def test_a_cancelled_audit_is_not_topped_up(owner, grid_site, fast_settings):
    audit, _, _, writer = _holding_half_a_level(owner, grid_site)
    assert audit.cancel()
    pending = _pending(audit)
    with pytest.raises(AuditStopped):
        writer.top_up()
    assert _pending(audit) == pending


def _item(kind: str, depth: int, linked: bool = True) -> Item:
    return Item(id=depth, url=f"http://127.0.0.1:9/{kind}/{depth}", url_hash=f"{kind}{depth}", kind=kind,
                depth=depth, in_sitemap=not linked, tries=0, linked=linked)


def test_the_depth_a_chunk_tops_up_to_is_that_of_its_deepest_linked_page(owner, grid_site, fast_settings):
    audit, _ = started(owner, grid_site)
    held = claim(audit.pk, 1)

    def cap(items):
        writer = ChunkWriter(audit, held, crawl_setup(audit))
        writer.hold(items)
        return writer.depth_cap

    # A resource sits a click below its page; a sitemap-only page may sit anywhere.
    assert cap([_item(Page.Kind.PAGE, 3), _item(Page.Kind.RESOURCE, 4), _item(Page.Kind.PAGE, 9, linked=False)]) == 3
    # No linked page in the first lease: top-ups bring checks only.
    assert cap([_item(Page.Kind.RESOURCE, 4), _item(Page.Kind.PAGE, 9, linked=False)]) == NO_PAGES
    assert NO_PAGES < 0


def _pending_pages_then_checks(owner, site, size: int) -> tuple[Audit, ChunkWriter]:
    """Chunk 1 claimed and held; pending: 2 * size pages at its depth cap, then twice a
    top-up's room of resource checks a click deeper."""
    audit, _ = started(owner, site)
    held = claim(audit.pk, 1)
    writer = ChunkWriter(audit, held, crawl_setup(audit))
    writer.hold(lease_items(audit, held))
    FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING).delete()
    depth = writer.depth_cap
    FrontierURL.objects.bulk_create(
        [FrontierURL(audit=audit, url=f"http://127.0.0.1:9/p/{i}", url_hash=f"p{i}", kind=Page.Kind.PAGE,
                     depth=depth, linked=True) for i in range(2 * size)]
        + [FrontierURL(audit=audit, url=f"http://127.0.0.1:9/r/{i}", url_hash=f"r{i}", kind=Page.Kind.RESOURCE,
                       depth=depth + 1) for i in range(size * TOP_UP_URLS_PER_PAGE * 2)])
    return audit, writer


def test_a_top_up_takes_more_checks_than_pages_but_no_more_pages_than_a_lease(owner, grid_site, fast_settings):
    # A HEAD check costs a small part of a parsed page, so a top-up that only
    # took CHUNK_SIZE URLs ran out within ~100 ms on a site's thousands of
    # resource checks, before the next answer could come back.
    size = fast_settings.SITEWARD["CHUNK_SIZE"]
    audit, writer = _pending_pages_then_checks(owner, grid_site, size)
    more = writer.top_up()
    kinds = [item.kind for item in more]
    # Of the first TOP_UP_URLS_PER_PAGE * size pending URLs (the 2 * size
    # shallower pages, then checks), the first size pages and every check.
    assert kinds.count(Page.Kind.PAGE) == size
    assert kinds.count(Page.Kind.RESOURCE) == size * TOP_UP_URLS_PER_PAGE - 2 * size
    assert more == spread_checks(more) and kinds[0] == Page.Kind.PAGE  # checks spread between the pages
    assert _pending(audit) == 2 * size + size * TOP_UP_URLS_PER_PAGE * 2 - len(more)
    # Only checks left that shallow: a whole top-up of them.
    FrontierURL.objects.filter(audit=audit, kind=Page.Kind.PAGE, state=FrontierURL.State.PENDING).delete()
    assert [item.kind for item in writer.top_up()] == [Page.Kind.RESOURCE] * (size * TOP_UP_URLS_PER_PAGE)


@pytest.mark.parametrize(("pages", "checks"), [(3, 7), (5, 2), (1, 4), (4, 0), (0, 3), (200, 647)])
def test_a_top_up_spreads_its_checks_between_its_pages_and_keeps_the_pages_in_order(pages, checks):
    # In lease order a top-up's checks, a click below its pages, all came last:
    # the window then ran through them ~10 times faster than the pages and ran
    # dry before the next top-up it had asked for came back.
    items = [_item(Page.Kind.PAGE, depth) for depth in range(pages)]
    items += [_item(Page.Kind.RESOURCE, 1000 + n) for n in range(checks)]
    spread = spread_checks(items)
    assert sorted(spread, key=lambda item: item.id) == sorted(items, key=lambda item: item.id)
    assert [item for item in spread if item.kind == Page.Kind.PAGE] == items[:pages]
    if pages and checks:
        # A page first, then no run of checks longer than a page's share of them.
        shape = "".join("P" if item.kind == Page.Kind.PAGE else "c" for item in spread)
        assert shape[0] == "P"
        assert max(len(run) for run in shape.split("P")) <= math.ceil(checks / pages)


def test_a_top_up_near_max_pages_takes_only_the_pages_left_and_its_checks(owner, grid_site, fast_settings):
    size = fast_settings.SITEWARD["CHUNK_SIZE"]
    audit, writer = _pending_pages_then_checks(owner, grid_site, size)
    Audit.objects.filter(pk=audit.pk).update(max_pages=FrontierURL.objects.pages_counted(audit) + 3)
    more = writer.top_up()
    kinds = [item.kind for item in more]
    # Three pages are left in the budget; the checks among the URLs read still go.
    assert kinds.count(Page.Kind.PAGE) == 3
    assert kinds.count(Page.Kind.RESOURCE) == size * TOP_UP_URLS_PER_PAGE - 2 * size


def test_a_first_lease_spreads_its_checks_between_its_pages_too(owner, grid_site, fast_settings):
    audit, _ = started(owner, grid_site)
    FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING).delete()
    FrontierURL.objects.bulk_create(
        [FrontierURL(audit=audit, url=f"http://127.0.0.1:9/r/{i}", url_hash=f"r{i}", kind=Page.Kind.RESOURCE,
                     depth=1) for i in range(6)]
        + [FrontierURL(audit=audit, url=f"http://127.0.0.1:9/p/{i}", url_hash=f"p{i}", kind=Page.Kind.PAGE,
                       depth=1, linked=True) for i in range(3)])
    items = lease_items(audit, claim(audit.pk, 1))
    shape = "".join("P" if item.kind == Page.Kind.PAGE else "c" for item in items)
    assert shape == "PccPccPcc"  # in lease order the six checks came first


def test_a_top_up_that_robots_txt_read_again_refuses_whole_leases_again(owner, grid_site, fast_settings):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "ROBOTS_MAX_AGE": 0}  # the rules count as read again
    audit, _ = started(owner, grid_site)
    held = claim(audit.pk, 1)
    audit.record_robots("ok", 200, "User-agent: *\nDisallow: /gone/\n", audit.sitemap_found)
    writer = ChunkWriter(audit, held, crawl_setup(audit))
    writer.hold(lease_items(audit, held))
    FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING).delete()
    size, depth = fast_settings.SITEWARD["CHUNK_SIZE"], writer.depth_cap
    FrontierURL.objects.bulk_create(
        [FrontierURL(audit=audit, url=grid_site.url(f"/gone/{i}"), url_hash=f"g{i}", kind=Page.Kind.PAGE,
                     depth=depth, linked=True) for i in range(2 * size)]
        + [FrontierURL(audit=audit, url=grid_site.url(f"/open/{i}"), url_hash=f"o{i}", kind=Page.Kind.PAGE,
                       depth=depth, linked=True) for i in range(size)])
    more = writer.top_up()
    assert [item.url for item in more] == [grid_site.url(f"/open/{i}") for i in range(size)]
    gone = FrontierURL.objects.filter(audit=audit, url__contains="/gone/")
    assert set(gone.values_list("state", "skip_reason")) == {("done", "blocked_by_robots")}
    assert audit.issues.filter(code="blocked_by_robots").count() == 2 * size

"""The chunk writer takes each URL's kind from the lease it holds, so a sub-batch asks the
frontier for kinds only for URLs the lease does not name (the start page's redirect row)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits.crawl.setup import crawl_setup
from audits.crawl.writer import ChunkWriter
from audits.models import Audit, FrontierURL, Page
from crawler.page import PageOutcome
from crawler.types import FetchResult

from .outcomes import parsed_page

pytestmark = pytest.mark.django_db


def frontier_kind_reads(writer, outcomes) -> int:
    with CaptureQueriesContext(connection) as queries:
        writer.write(outcomes)
    return sum('"kind"' in q["sql"] and q["sql"].startswith("SELECT") and "audits_frontierurl" in q["sql"]
               for q in queries.captured_queries)


def test_kinds_come_from_the_lease_and_are_read_only_for_urls_it_does_not_hold(chunk_writer):
    plain, items = chunk_writer
    leased = ChunkWriter(plain.audit, plain.lease, crawl_setup(plain.audit))
    leased.hold(items)
    assert frontier_kind_reads(leased, [parsed_page(items[0].url)]) == 0
    assert frontier_kind_reads(leased, [parsed_page(items[1].url), parsed_page(items[0].url + "?other")]) == 1
    assert frontier_kind_reads(plain, [parsed_page(items[1].url)]) == 1  # no lease kinds: asked
    stored = dict(Page.objects.filter(audit=plain.audit, url__in=[i.url for i in items[:2]]).values_list("url", "kind"))
    assert stored == {item.url: item.kind for item in items[:2]}


def resource_check(url: str) -> PageOutcome:
    """A HEAD check of an image: never parsed, so it has no links."""
    return PageOutcome(url, 1, FetchResult(url, url, status=200, content_type="image/png"), None, (), ())


def edge_deletes(writer, outcomes) -> int:
    with CaptureQueriesContext(connection) as queries:
        writer.write(outcomes)
    return sum(q["sql"].startswith("DELETE") and "audits_linkedge" in q["sql"] for q in queries.captured_queries)


def test_only_parsed_pages_have_their_earlier_link_edges_replaced(chunk_writer):
    plain, items = chunk_writer
    page = items[0]
    assert page.kind == Page.Kind.PAGE
    image = page.url.rstrip("/") + "/logo.png"
    assert edge_deletes(plain, [resource_check(image)]) == 0  # checks are never parsed: no edges
    assert edge_deletes(plain, [parsed_page(page.url), resource_check(image)]) == 1


def test_a_page_at_the_depth_limit_reached_since_by_a_shorter_path_has_its_links_queued(chunk_writer):
    """Leased at the limit, then linked from a shallower page by a chunk beside this one: its frontier row
    says so by the time it is written, and its links are a click below that, within the limit."""
    writer, items = chunk_writer
    page = next(item for item in items if item.kind == Page.Kind.PAGE)
    Audit.objects.filter(pk=writer.audit.pk).update(max_depth=page.depth + 1)
    writer.audit.refresh_from_db()
    beyond = page.url.rstrip("/") + "/only-linked-from-here"
    writer.write([parsed_page(page.url, (beyond, "deeper"), depth=page.depth + 1)])
    assert FrontierURL.objects.get(audit=writer.audit, url=beyond).depth == page.depth + 1
    assert Page.objects.get(audit=writer.audit, url=page.url).depth == page.depth

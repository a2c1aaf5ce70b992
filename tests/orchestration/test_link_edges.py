"""Link edges are written once per (source, target, tag): a page written again (a retried
chunk, a duplicate delivery) replaces its edges instead of adding to them."""

import pytest

from audits.crawling import (
    ChunkWriter,
    InlineDispatcher,
    _lease_urls,
    claim_chunk,
    crawl_setup,
    run_start,
)
from audits.models import Audit, LinkEdge
from crawler.page import PageOutcome
from crawler.types import FetchResult, Link, PageFacts

pytestmark = pytest.mark.django_db


def _page(url: str, *targets: tuple[str, str]) -> PageOutcome:
    links = tuple(Link(target, "a", text) for target, text in targets)
    return PageOutcome(url, 0, FetchResult(url, url, status=200, content_type="text/html"),
                       PageFacts(links=links), (), links)


@pytest.fixture
def writer(owner, grid_site, fast_settings):
    audit = Audit.objects.create(owner=owner, start_url=grid_site.url("/"), allow_private=True)
    run_start(audit.pk, InlineDispatcher())
    audit.refresh_from_db()
    claim = claim_chunk(audit.pk, 1)
    source = _lease_urls(audit, claim.lease)[0].url
    return ChunkWriter(audit, claim.lease, crawl_setup(audit)), source, grid_site


def _edges(writer, source):
    return sorted(LinkEdge.objects.filter(audit=writer.audit, source_url=source)
                  .values_list("target_url", "anchor_text"))


def test_writing_a_page_twice_leaves_one_edge_per_link(writer):
    writer, source, site = writer
    page = _page(source, (site.url("/a"), "A"), (site.url("/b"), "B"))
    writer.write([page])
    writer.write([page])
    assert _edges(writer, source) == [(site.url("/a"), "A"), (site.url("/b"), "B")]


def test_a_page_written_again_keeps_only_the_links_of_its_last_fetch(writer):
    writer, source, site = writer
    writer.write([_page(source, (site.url("/a"), "A"), (site.url("/b"), "B"))])
    writer.write([_page(source, (site.url("/b"), "Bee"), (site.url("/c"), "C"))])
    assert _edges(writer, source) == [(site.url("/b"), "Bee"), (site.url("/c"), "C")]
    # Other pages' edges are untouched.
    other = site.url("/")
    writer.write([_page(other, (site.url("/a"), "A"))])
    writer.write([_page(source, (site.url("/c"), "C"))])
    assert _edges(writer, other) == [(site.url("/a"), "A")]

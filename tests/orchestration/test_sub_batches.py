"""How many results a chunk writes at once: SUB_BATCH, or RESOURCE_SUB_BATCH for a chunk
that holds no page (resource and external checks make small rows, so a write's fixed
costs weigh more)."""

from audits.crawling import RESOURCE_SUB_BATCH, SUB_BATCH, Item, _sub_batch
from audits.models import Page


def item(kind: str) -> Item:
    return Item(id=1, url="http://127.0.0.1:9/x", url_hash="h", kind=kind, depth=1, in_sitemap=False, tries=0)


def test_a_chunk_of_resource_and_external_checks_writes_more_results_at_once():
    assert _sub_batch([item(Page.Kind.RESOURCE), item(Page.Kind.EXTERNAL)]) == RESOURCE_SUB_BATCH
    assert RESOURCE_SUB_BATCH > SUB_BATCH


def test_one_page_in_the_chunk_keeps_the_page_sub_batch():
    assert _sub_batch([item(Page.Kind.RESOURCE), item(Page.Kind.PAGE)]) == SUB_BATCH

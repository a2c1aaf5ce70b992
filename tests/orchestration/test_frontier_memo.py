"""The frontier memo: link targets already committed to the frontier are not looked up again,
and nothing a rolled-back sub-batch queued is ever taken as known."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits import frontier_memo
from audits.crawling import (
    ChunkWriter,
    InlineDispatcher,
    _lease_urls,
    claim_chunk,
    crawl_setup,
    run_start,
)
from audits.models import Audit, FrontierURL
from crawler.page import PageOutcome
from crawler.types import FetchResult, Link, PageFacts
from crawler.urls import url_hash

pytestmark = pytest.mark.django_db


def _writer(owner, site):
    audit = Audit.objects.create(owner=owner, start_url=site.url("/"), allow_private=True)
    run_start(audit.pk, InlineDispatcher())
    audit.refresh_from_db()
    claim = claim_chunk(audit.pk, 1)
    items = _lease_urls(audit, claim.lease)
    return audit, ChunkWriter(audit, claim.lease, crawl_setup(audit)), items


def _page(url: str, *targets: str) -> PageOutcome:
    links = tuple(Link(t, "a", "text") for t in targets)
    return PageOutcome(url, 1, FetchResult(url, url, status=200, content_type="text/html"),
                       PageFacts(links=links), (), links)


def _frontier_lookups(queries, digest: str) -> list[str]:
    return [q["sql"] for q in queries if "audits_frontierurl" in q["sql"] and q["sql"].lstrip().startswith("SELECT")
            and digest in q["sql"]]


def test_a_target_queued_by_an_earlier_sub_batch_is_not_looked_up_again(owner, grid_site, fast_settings):
    audit, writer, items = _writer(owner, grid_site)
    new = grid_site.url("/memo/new-page")
    writer.write([_page(items[0].url, new)])
    assert FrontierURL.objects.filter(audit=audit, url=new, linked=True).exists()
    with CaptureQueriesContext(connection) as seen:
        writer.write([_page(grid_site.url("/"), new)])
    assert _frontier_lookups(seen.captured_queries, url_hash(new)) == []
    assert FrontierURL.objects.filter(audit=audit, url=new).count() == 1


def test_a_rolled_back_sub_batch_is_not_remembered_and_its_targets_are_queued_on_retry(
    owner, grid_site, fast_settings, monkeypatch,
):
    audit, writer, items = _writer(owner, grid_site)
    new = grid_site.url("/memo/after-rollback")

    def database_gone(self, **counters):
        raise RuntimeError("database went away mid-transaction")

    monkeypatch.setattr(Audit, "beat", database_gone)  # fails after the frontier insert, inside it
    with pytest.raises(RuntimeError):
        writer.write([_page(items[0].url, new)])
    monkeypatch.undo()
    assert not FrontierURL.objects.filter(audit=audit, url=new).exists()
    assert not writer.memo.settled(url_hash(new), True)
    writer.write([_page(items[0].url, new)])
    assert FrontierURL.objects.filter(audit=audit, url=new, linked=True).exists()


def test_a_reused_audit_id_gets_a_fresh_memo(owner):
    first = Audit.objects.create(owner=owner, start_url="http://127.0.0.1:9/")
    memo = frontier_memo.memo_for(first)
    memo.remember(["a" * 32], [])
    reborn = Audit(pk=first.pk, created_at=first.created_at + timedelta(seconds=1))
    assert frontier_memo.memo_for(reborn) is not memo
    assert frontier_memo.memo_for(first) is memo


def test_the_memo_stops_growing_at_its_cap(monkeypatch):
    monkeypatch.setattr(frontier_memo, "CAP", 3)
    memo = frontier_memo.FrontierMemo()
    memo.remember(["a", "b"], ["r1", "r2"])
    assert memo.linked == {"a", "b"} and memo.present == {"r1"}
    memo.remember(["c"], [])
    assert "c" not in memo.linked
    # A resource known present settles a resource offer, not a page offer.
    assert memo.settled("r1", is_page=False) and not memo.settled("r1", is_page=True)

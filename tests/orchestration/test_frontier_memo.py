"""The frontier memo: link targets already committed to the frontier are not looked up again,
and nothing a rolled-back sub-batch queued is ever taken as known."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits import frontier_memo
from audits.crawling import ChunkWriter
from audits.models import Audit, FrontierURL
from crawler.urls import url_hash

from .outcomes import parsed_page

pytestmark = pytest.mark.django_db


def _frontier_lookups(queries, digest: str) -> list[str]:
    return [q["sql"] for q in queries if "audits_frontierurl" in q["sql"] and q["sql"].lstrip().startswith("SELECT")
            and digest in q["sql"]]


def test_a_target_queued_by_an_earlier_sub_batch_is_not_looked_up_again(chunk_writer, grid_site):
    writer, items = chunk_writer
    audit = writer.audit
    new = grid_site.url("/memo/new-page")
    writer.write([parsed_page(items[0].url, (new, "text"), depth=1)])
    assert FrontierURL.objects.filter(audit=audit, url=new, linked=True).exists()
    with CaptureQueriesContext(connection) as seen:
        writer.write([parsed_page(grid_site.url("/"), (new, "text"), depth=1)])
    assert _frontier_lookups(seen.captured_queries, url_hash(new)) == []
    assert FrontierURL.objects.filter(audit=audit, url=new).count() == 1


def test_a_rolled_back_sub_batch_is_not_remembered_and_its_targets_are_queued_on_retry(
    chunk_writer, grid_site, monkeypatch,
):
    writer, items = chunk_writer
    audit = writer.audit
    new = grid_site.url("/memo/after-rollback")

    def database_gone(self, *args, **counters):
        raise RuntimeError("database went away mid-transaction")

    # Fails after the frontier insert, inside the transaction (the last statement
    # of a write: the beat, or on PostgreSQL the statement that also fences).
    monkeypatch.setattr(Audit, "beat", database_gone)
    monkeypatch.setattr(ChunkWriter, "_close_on_postgresql", database_gone)
    with pytest.raises(RuntimeError):
        writer.write([parsed_page(items[0].url, (new, "text"), depth=1)])
    monkeypatch.undo()
    assert not FrontierURL.objects.filter(audit=audit, url=new).exists()
    assert not writer.memo.settled(url_hash(new), True)
    writer.write([parsed_page(items[0].url, (new, "text"), depth=1)])
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

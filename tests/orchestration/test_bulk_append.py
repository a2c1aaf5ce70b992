"""bulk.append adds rows to a table without a unique key (link edges) as they are:
COPY on PostgreSQL, a prepared INSERT on SQLite, the same rows either way."""

import pytest

from audits import bulk
from audits.crawling import EDGE_COLUMNS
from audits.models import Audit, LinkEdge

# Text a page controls, with everything COPY's text format has to escape.
AWKWARD = ["plain", "", "tab\there", "new\nline", "back\\slash", "\\N", "quote ' and \"", "ünïcödé ✓ 链接"]


@pytest.mark.django_db
def test_appended_edges_are_stored_exactly_as_given(owner):
    audit = Audit.objects.create(owner=owner, start_url="http://127.0.0.1:9/")
    rows = [
        (audit.pk, f"s{i:031d}", f"http://127.0.0.1:9/p/{i}", f"t{i:031d}", f"http://127.0.0.1:9/t/{i}",
         "a" if i % 2 else "img", text, i % 3 == 0, i % 2 == 0)
        for i, text in enumerate(AWKWARD * 3)
    ]
    bulk.append(LinkEdge, EDGE_COLUMNS, iter(rows))
    stored = list(LinkEdge.objects.filter(audit=audit).order_by("source_hash").values_list(*EDGE_COLUMNS))
    assert stored == sorted(rows, key=lambda row: row[1])


@pytest.mark.django_db
def test_appending_nothing_writes_nothing(owner):
    audit = Audit.objects.create(owner=owner, start_url="http://127.0.0.1:9/")
    bulk.append(LinkEdge, EDGE_COLUMNS, [])
    assert not LinkEdge.objects.filter(audit=audit).exists()

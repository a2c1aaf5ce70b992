"""Link edges by target: built once an audit's crawl is over, read by finalize and the page view.

The crawl writes edges in the order pages are fetched, each with a random
target hash, so an index by target kept up during the crawl costs a random
leaf-page write per edge on every commit (see LinkEdge.Meta). Built afterwards
with one sorted INSERT ... SELECT, the same index costs under two seconds per
million edges (benchmarks/edge_index.py).
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import QuerySet

from .models import Audit, Inlink, LinkEdge

BUILD_SQL = """
    INSERT INTO audits_inlink (audit_id, target_hash, tag, edge_id)
    SELECT audit_id, target_hash, tag, id FROM audits_linkedge
    WHERE audit_id = %s
    ORDER BY target_hash, tag, id
"""


def build(audit: Audit) -> bool:
    """Index the audit's edges by target, once; False when they already are.

    Runs when nothing writes the audit's edges any more (finalize). A rebuild
    after a resume replaces the rows an earlier finalize left.
    """
    with transaction.atomic():
        if not Audit.objects.filter(pk=audit.pk, links_indexed=False).update(links_indexed=True):
            return False
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM audits_inlink WHERE audit_id = %s", [audit.pk])
            cursor.execute(BUILD_SQL, [audit.pk])
    audit.links_indexed = True
    return True


def edges_to(audit: Audit, target_hash: str) -> QuerySet[LinkEdge]:
    """The audit's edges that point at ``target_hash``, in the order they were written."""
    edges = LinkEdge.objects.filter(audit=audit)
    if audit.links_indexed:
        ids = Inlink.objects.filter(audit=audit, target_hash=target_hash).values("edge_id")
        return edges.filter(id__in=ids).order_by("id")
    # Not built yet (running) or not current (failed, cancelled, resumed): a scan
    # of the audit's edges, correct and fine for one page's view.
    return edges.filter(target_hash=target_hash).order_by("id")

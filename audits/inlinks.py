"""Link edges by target: built once an audit has ended, read by a page's "linked from" list.

The crawl writes edges in the order pages are fetched, each with a random
target hash, so an index by target kept up during the crawl costs a random
index-page write per edge (see LinkEdge.Meta); built afterwards with one sorted
INSERT ... SELECT, it is written in order. Finalize does not need it (its link
checks read each edge once), so the build is a task of its own after the audit
ends: enqueued by the finalize task, and by the watchdog for any ended audit
still without it (a failed or cancelled one, one the command line finished).
For a failed or cancelled audit it is also where its issues take the review
marks and ignore rules finalize gives a completed one's: the one step that runs
once nothing writes the audit any more.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from . import diff, finalize
from .models import Audit, ChunkLease, Inlink, LinkEdge

# First key of PostgreSQL's two-key advisory locks taken here ("inlk").
LOCK_SPACE = 0x696E6C6B

# What a page's inlinks count: links a visitor follows (finalize's INLINK_COUNTS_SQL
# counts the same tags). Images, scripts, stylesheets, hreflang alternates and
# form actions pointing at a URL are references, listed apart on its page.
LINK_TAGS = ("a", "area")

BUILD_SQL = """
    INSERT INTO audits_inlink (audit_id, target_hash, tag, edge_id)
    SELECT audit_id, target_hash, tag, id FROM audits_linkedge
    WHERE audit_id = %s
    ORDER BY target_hash, tag, id
"""

# Page.inlinks of an audit that ended without finalize (failed, cancelled), from
# the rows just built: one primary-key range per page, and only changed rows written.
COUNT_SQL = """
    UPDATE audits_page SET inlinks = ({count})
    WHERE audit_id = %s AND inlinks <> ({count})
""".format(count="SELECT COUNT(*) FROM audits_inlink i WHERE i.audit_id = audits_page.audit_id "
                 "AND i.target_hash = audits_page.url_hash AND i.tag IN ('a', 'area')")


def build(audit: Audit, *, while_status: tuple[str, ...]) -> bool:
    """Index the audit's edges by target, once; False when they already are.

    ``while_status``: the statuses in which the audit's edges are final (an
    ended audit's). Should it leave them meanwhile (a resume), or end again
    after one (its ``finished_at`` is no longer the one ``audit`` was read
    with: the resumed crawl added edges), the build is rolled back.

    Runs when nothing writes the audit's edges any more: once the audit has
    completed, or failed or been cancelled and its leases have run out
    (``build_ended``). An audit that stopped early gets here what finalize
    gives a completed one and a part can say: its pages' inlinks, its broken
    links among what it fetched (``finalize.check_stopped_links``), and its issues' review marks
    and the site's ignore rules (``diff.carry_triage``), rescored. In the same
    transaction as the flag, so they are done exactly when it is set, and done
    again after a resume that ends early again.
    A rebuild after a resume replaces the rows an earlier build left. The flag
    (and that rescore) is written last, so the audit row is locked only for
    that moment (a cancel or the watchdog must not wait behind a long build); on PostgreSQL two builds of
    one audit queue on an advisory lock instead, and the build may outlast the
    connection's statement_timeout (a big audit's edges take seconds a million).
    """
    if Audit.objects.filter(pk=audit.pk, links_indexed=True).exists():
        return False
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_SPACE, audit.pk])
            cursor.execute("SET LOCAL statement_timeout = 0")
        if Audit.objects.filter(pk=audit.pk, links_indexed=True).exists():
            return False  # built by whoever held the lock before us
        cursor.execute("DELETE FROM audits_inlink WHERE audit_id = %s", [audit.pk])
        cursor.execute(BUILD_SQL, [audit.pk])
        if audit.status != Audit.Status.COMPLETED:
            # Finalize counted a completed audit's; an audit that stopped early
            # gets its counts here, so its pages table can sort by them.
            cursor.execute(COUNT_SQL, [audit.pk])
            # Here, not as the audit fails or is cancelled: a chunk may still write a last sub-batch after
            # that, and its links and issues must count too.
            finalize.check_stopped_links(audit)
            diff.carry_triage(audit, diff.baseline_for(audit))
            audit.rescore()
        still_final = Audit.objects.filter(pk=audit.pk, status__in=while_status, finished_at=audit.finished_at)
        if not still_final.update(links_indexed=True):
            transaction.set_rollback(True)
            return False
    audit.links_indexed = True
    return True


def build_ended(audit_id: int) -> str:
    """Index an ended audit's edges (the finalize task and the watchdog enqueue this)."""
    audit = ended_unindexed().filter(pk=audit_id).first()
    if audit is None:
        return "nothing to do"
    built = build(audit, while_status=tuple(Audit.ENDED))
    return "indexed" if built else "not indexed"


def ended_unindexed() -> QuerySet[Audit]:
    """Ended audits whose edges are final but not indexed yet.

    A completed audit's are final; a failed or cancelled one's once no chunk
    holds a live lease: a chunk that was mid-write when the audit ended may
    still write one last sub-batch, and then stops. One that stopped during
    finalize waits out a task's time limit: the check finalize was running
    inserts its issues before it sees the audit has ended.
    """
    live = ChunkLease.objects.filter(audit=OuterRef("pk"), state=ChunkLease.State.LEASED, leased_until__gt=Now())
    finalizing = timezone.now() - timedelta(seconds=settings.Q_CLUSTER["timeout"])
    return (Audit.objects.filter(status__in=Audit.ENDED, links_indexed=False).exclude(Exists(live))
            .exclude(status__in=[Audit.Status.FAILED, Audit.Status.CANCELLED],
                     failed_phase=Audit.Phase.FINALIZING, finished_at__gt=finalizing))


def edges_to(audit: Audit, target_hash: str) -> QuerySet[LinkEdge]:
    """The audit's edges that point at ``target_hash``, in the order they were written."""
    edges = LinkEdge.objects.filter(audit=audit)
    if audit.links_indexed:
        ids = Inlink.objects.filter(audit=audit, target_hash=target_hash).values("edge_id")
        return edges.filter(id__in=ids).order_by("id")
    # Not built yet (running, or just ended) or not current (resumed): a scan of
    # the audit's edges, correct and fine for one page's view.
    return edges.filter(target_hash=target_hash).order_by("id")


def counts_stored(audit: Audit) -> bool:
    """Whether Page.inlinks is current: finalize counted it (completed), or the build did (an ended audit)."""
    return audit.status == Audit.Status.COMPLETED or audit.links_indexed


def inlink_counts(audit: Audit, hashes: list[str]) -> dict[str, int]:
    """Links (LINK_TAGS) to each of ``hashes`` now, in one grouped query: what a page's detail lists.

    Through Inlink's key once it is built; before that (a running audit, or
    one just ended) a scan of the audit's edges, as ``edges_to`` does.
    """
    if not hashes:
        return {}
    if audit.links_indexed:
        rows = Inlink.objects.filter(audit=audit, target_hash__in=hashes, tag__in=LINK_TAGS)
    else:
        rows = LinkEdge.objects.filter(audit=audit, target_hash__in=hashes, tag__in=LINK_TAGS)
    counts = dict(rows.values("target_hash").annotate(n=Count("*")).order_by().values_list("target_hash", "n"))
    return {digest: counts.get(digest, 0) for digest in hashes}

"""What an audit does next once a chunk ends: another chunk, a wait, or finalize.

Also the page budget every lease respects, and the record of URLs lost with a
chunk that ran out of attempts. The watchdog uses these too, so nothing here
touches a running chunk's machinery.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.db.models.functions import Now

from crawler.types import FetchError

from ..dispatch import RETRY_AFTER_RESCHEDULE_CAP, Dispatcher
from ..knobs import knob
from ..models import Audit, ChunkLease, FrontierURL, Page
from ..services import crawl_queue

WORKER_LOST_DETAIL = "The worker crawling this URL died on every try"


def advance(audit: Audit, after: int, dispatcher: Dispatcher) -> None:
    """After chunk ``after`` (or start, resume, the watchdog): fill free chunk slots, wait, or finalize.

    Under the audit row's lock, so of two chunks ending at once the second sees
    the first's lease closed: exactly one finds no chunk open and finalizes.
    """
    with transaction.atomic():
        if not lock_running(audit):
            return
        # Read before has_work: a URL that comes due in between is then seen by
        # has_work, never missed by both (which would finalize without it).
        wait = retry_wait(audit)
        if has_work(audit):
            # While the site's pause runs a chunk could start nothing on it: it waits, as a URL not yet due does.
            wait = site_pause(audit) or None
            if wait is None:
                fill_slots(audit, dispatcher)
                return
        elif wait is not None:
            wait = max(wait, site_pause(audit))  # once due, the URL waits for the site's pause too
        if ChunkLease.objects.open_for(audit.pk).exists():
            return  # the last chunk to end decides what comes next
        if wait is not None:
            dispatcher.wait(audit.pk, after, wait)
            return
        if audit.begin_finalize():
            dispatcher.finalize(audit.pk)


def lock_running(audit: Audit) -> bool:
    """Lock the audit's row until the transaction ends (PostgreSQL); whether it is still running."""
    return Audit.objects.select_for_update().filter(pk=audit.pk, status=Audit.Status.RUNNING).values_list(
        "pk", flat=True).first() is not None


def fill_slots(audit: Audit, dispatcher: Dispatcher) -> int:
    """Schedule chunks while pending URLs and free chunk slots remain; how many. The caller holds the audit lock.

    Never more chunks than requests the audit may have in flight, nor than
    the pending URLs would fill, and none when a chunk would lease nothing or
    the site's pause runs (a chunk would sit idle in it, holding a worker).
    """
    slots = min(dispatcher.chunks_per_audit(), max(1, audit.concurrency))
    running = ChunkLease.objects.open_for(audit.pk).count()
    if running >= slots or site_pause(audit):
        return 0
    size = knob("CHUNK_SIZE")
    pending = FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING)[:(slots - running) * size]
    wanted = min(slots - running, -(-pending.count() // size))
    if not wanted or not has_work(audit):
        # Pending rows past the page budget or not yet due would only make empty chunks.
        return 0
    if running + wanted > 1:
        audit.mark_out_of_order()
    first = (ChunkLease.objects.filter(audit=audit).aggregate(n=Max("number"))["n"] or 0) + 1
    for number in range(first, first + wanted):
        schedule_chunk(audit, number, dispatcher)
    return wanted


def schedule_chunk(audit: Audit, number: int, dispatcher: Dispatcher) -> None:
    """Create chunk ``number``'s lease row and schedule it, once (the row is the guard)."""
    # created_at on the database clock, as the watchdog reads it (several machines, several clocks).
    _, created = ChunkLease.objects.get_or_create(audit=audit, number=number, defaults={"created_at": Now()})
    if created:
        dispatcher.chunk(audit.pk, number, crawl_queue(audit))


def has_work(audit: Audit) -> bool:
    """Whether a chunk started now would lease anything."""
    due = FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING).due()
    if FrontierURL.objects.links_to_follow(audit.pk):
        due = due.exclude(kind=Page.Kind.PAGE, linked=False)  # sitemap-only pages wait (FrontierURL.lease_next)
    if page_budget(audit) > 0 and due.exists():
        return True
    # Out of pages: resources, external links and rescheduled pages still go.
    return due.exclude(kind=Page.Kind.PAGE, reschedules=0).exists()


def retry_wait(audit: Audit) -> float | None:
    """Seconds until the first pending rate-limited URL is due (0 when one is); None when none waits."""
    first = (FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.PENDING, not_before__isnull=False)
             .annotate(db_now=Now()).order_by("not_before").values_list("not_before", "db_now").first())
    if first is None:
        return None
    not_before, now = first
    return max(0.0, (not_before - now).total_seconds())


def site_pause(audit: Audit) -> float:
    """Seconds left of the site's stored Retry-After pause (``Audit.pause_site``), never more than the
    longest wait a Retry-After may ask of the audit: a row written under another cap, or by a clock
    that jumped, cannot hold the crawl for longer."""
    return min(audit.site_pause_left(), RETRY_AFTER_RESCHEDULE_CAP)


def page_budget(audit: Audit) -> int:
    """How many more pages the audit may lease: exact near max_pages, a lower bound far from it.

    ``pages_discovered`` grows in the same transaction that queues every page
    it counts, so while max_pages is a whole chunk or more beyond it no lease
    can overrun, and the frontier need not be counted (a count per chunk would
    make a big crawl's bookkeeping grow with the square of its size).
    Exact a sitemap reserve earlier too: lease_next holds the reserve back
    from link-found pages, which only an exact budget makes tight.
    """
    max_pages, discovered = Audit.objects.filter(pk=audit.pk).values_list("max_pages", "pages_discovered").get()
    if max_pages - discovered >= knob("CHUNK_SIZE") + FrontierURL.objects.sitemap_reserve(max_pages):
        return max_pages - discovered
    # Exact: chunks leasing at once take turns on the audit's row, so two never
    # spend the same remainder.
    lock_running(audit)
    return max_pages - FrontierURL.objects.pages_counted(audit)


def abandon_chunk(lease: ChunkLease, dispatcher: Dispatcher) -> bool:
    """A chunk out of attempts: its remaining URLs are recorded as lost and the crawl goes on.

    If the start page itself is among them the audit fails (``worker_lost``):
    nothing else can be found without it.
    """
    with transaction.atomic():
        if not lease.abandon():
            return False
        audit = Audit.objects.get(pk=lease.audit_id)
        lost = list(FrontierURL.objects.filter(audit=audit, chunk=lease.number, state=FrontierURL.State.LEASED))
        record_lost(audit, lost)
        if any(row.depth == 0 and row.linked for row in lost) and not Page.objects.filter(
                audit=audit, depth=0, fetch_error="").exists():
            audit.fail(Audit.ErrorCode.WORKER_LOST,
                       f"The start page killed its worker {lease.attempts} times.", Audit.Phase.CRAWLING)
            return True
        advance(audit, lease.number, dispatcher)
    return True


def record_lost(audit: Audit, rows: list[FrontierURL]) -> None:
    """URLs whose fetch killed the worker on every try: a row each, so the report says so."""
    Page.objects.bulk_create([
        Page(audit=audit, url=row.url, url_hash=row.url_hash, kind=row.kind, depth=row.depth,
             final_url=row.url, fetch_error=FetchError.WORKER_LOST.value, fetch_error_detail=WORKER_LOST_DETAIL,
             in_sitemap=row.in_sitemap)
        for row in rows
    ], ignore_conflicts=True)
    FrontierURL.objects.filter(id__in=[row.id for row in rows]).mark_done()
    audit.beat(pages_failed=sum(1 for row in rows if row.kind == Page.Kind.PAGE))

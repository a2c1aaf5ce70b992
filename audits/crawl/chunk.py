"""One chunk of an audit: claim it, crawl its URLs through the rolling window, hand over."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.db import transaction

from crawler.checks import PageContext
from crawler.fetch import Fetcher
from crawler.page import PageOutcome, check_resource, process_page
from crawler.urls import InvalidURL, Scope, origin_of
from crawler.window import WindowPolicy, fetch_health, run_window

from ..dispatch import Dispatcher
from ..models import Audit, ChunkLease, FrontierURL, Issue, Page
from .bridge import run_with_db_here
from .progress import abandon_chunk, advance, page_budget
from .setup import CrawlSetup, crawl_setup, knob
from .writer import AuditStopped, ChunkWriter, Item, LeaseLost, items_of

log = logging.getLogger(__name__)

# Pages written per transaction: bigger batches amortise the commit, the fence
# and the counters, smaller ones keep the crawl from waiting on a long write. A
# batch is also flushed after a second.
SUB_BATCH = 100
# A resource or external check counts half a page toward a sub-batch: its rows
# are small (no links, no body facts).
PAGE_WEIGHT = 2


def claim(audit_id: int, number: int) -> ChunkLease | None:
    """Take chunk ``number`` of the audit, or None (done, leased by a live worker, or out of attempts)."""
    return ChunkLease.objects.claim(audit_id, number, seconds=knob("LEASE_SECONDS"),
                                    max_attempts=knob("MAX_CHUNK_ATTEMPTS"))


def run_chunk(audit_id: int, number: int, dispatcher: Dispatcher | None = None,
              on_batch: Callable[[list[PageOutcome], list[Issue]], None] | None = None) -> str:
    """Crawl chunk ``number`` of an audit. Returns what happened, for logs and tests."""
    dispatcher = dispatcher or Dispatcher()
    audit = Audit.objects.get(pk=audit_id)
    if audit.status != Audit.Status.RUNNING or audit.phase != Audit.Phase.CRAWLING:
        ChunkLease.objects.filter(audit=audit, number=number).exclude(state=ChunkLease.State.DONE).update(
            state=ChunkLease.State.ABANDONED)
        return "audit-not-running"
    lease = claim(audit_id, number)
    if lease is None:
        lease = ChunkLease.objects.filter(audit=audit, number=number).first()
        if lease and lease.state == ChunkLease.State.LEASED and lease.attempts >= knob("MAX_CHUNK_ATTEMPTS") \
                and lease.expired():
            abandon_chunk(lease, dispatcher)
            return "abandoned"
        return "refused"
    # A retry after a worker death runs one URL at a time, each marked first,
    # so a URL that kills its worker is found and recorded as lost.
    serial = lease.attempts > 1
    items = lease_items(audit, lease)
    setup = crawl_setup(audit)
    writer = ChunkWriter(audit, lease, setup, on_batch=on_batch)
    writer.hold(items)
    try:
        if serial:
            items = writer.drop_poison(items)
        lease_seconds = knob("LEASE_SECONDS")
        # The lease lasts three heartbeats: a worker that dies is found after
        # that, not after a long lease (writes also extend it).
        report = run_with_db_here(lambda db: crawl_items(items, setup, writer, db, serial=serial),
                                  idle=lambda: lease.fence(lease_seconds), idle_every=lease_seconds / 3)
    except LeaseLost:
        log.warning("audit %s chunk %s: lease reclaimed by another worker; stopping", audit_id, number)
        return "lease-lost"
    except AuditStopped:
        lease.release()
        lease.finish()
        return "stopped"
    with transaction.atomic():
        if not lease.finish(unfinished=[item.id for item in report.unfinished]):
            return "lease-lost"
        # A serial retry says nothing about the site's load: the next chunk
        # keeps the last real window.
        if not serial:
            Audit.objects.filter(pk=audit_id).update(current_window=report.final)
        audit.beat(chunks_done=1)
        advance(audit, number, dispatcher)
    return "done"


def lease_items(audit: Audit, lease: ChunkLease) -> list[Item]:
    """The URLs of this chunk: the ones a previous try held, or up to CHUNK_SIZE fresh ones."""
    held = FrontierURL.objects.held_by(lease)
    if not held.exists():
        FrontierURL.objects.lease_next(lease, knob("CHUNK_SIZE"), budget=page_budget(audit))
    items = items_of(held)
    ChunkLease.objects.filter(pk=lease.pk, token=lease.token).update(url_count=len(items))
    return items


async def crawl_items(items: list[Item], setup: CrawlSetup, writer: ChunkWriter, db, *, serial: bool):
    """Fetch, parse and check ``items`` through the rolling window; sub-batches go to ``writer`` via ``db``."""
    deadline = time.monotonic() + knob("CHUNK_SOFT_DEADLINE")
    context = PageContext(setup.checks, is_internal=internal_test(setup.scope))
    window = setup.window
    css_depth = writer.audit.max_depth + 1
    if serial:
        window = WindowPolicy(floor=1, start=1, cap=1, per_host=1, rate=window.rate,
                              crawl_delay=window.crawl_delay)

    async with Fetcher(setup.policy, setup.guard, concurrency=window.cap) as fetcher:

        async def work(item: Item) -> PageOutcome:
            if serial:
                await db(writer.mark_try, item)
            if item.kind == Page.Kind.PAGE:
                ctx = PageContext(context.settings, context.is_internal, in_sitemap=item.in_sitemap)
                return await process_page(fetcher, item.url, item.depth, ctx)
            if item.kind == Page.Kind.RESOURCE:
                # Resources are internal; a stylesheet is read one level below the
                # deepest page, so @import chains end with the crawl's depth.
                return await check_resource(fetcher, item.url, item.depth, context,
                                            read_css=item.depth <= css_depth)
            result = await fetcher.check(item.url)
            return PageOutcome(item.url, item.depth, result, None, (), ())

        async def sink(outcomes: list[PageOutcome]) -> None:
            await db(writer.write, outcomes)

        async def refill() -> list[Item]:
            return await db(writer.top_up)

        return await run_window(
            items, work, sink, policy=window, host_of=lambda item: "",
            health_of=lambda outcome: fetch_health(outcome.result, window),
            soft_deadline=deadline, max_batch_wait=1.0,
            batch_size=1 if serial else SUB_BATCH * PAGE_WEIGHT, weight_of=None if serial else weight,
            # A serial retry runs exactly the URLs the chunk held, to find a poison one.
            refill=None if serial else refill,
        )


def weight(outcome: PageOutcome) -> int:
    """What a result counts toward a sub-batch: a parsed page PAGE_WEIGHT, a check 1."""
    return PAGE_WEIGHT if outcome.facts is not None else 1


def internal_test(scope: Scope | None) -> Callable[[str], bool]:
    origin = scope.origin if scope else ""

    def is_internal(url: str) -> bool:
        try:
            return origin_of(url) == origin
        except InvalidURL:
            return False

    return is_internal

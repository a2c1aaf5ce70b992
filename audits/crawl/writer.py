"""Writing one sub-batch of a chunk's results: one fenced transaction, on the database thread."""

from __future__ import annotations

import dataclasses
import logging
import math

from django.db import connection, transaction

from crawler.page import PageOutcome
from crawler.revalidate import Validators
from crawler.types import FetchError
from crawler.urls import CRAWL_MAX_PATTERNS, compile_patterns, url_hash

from .. import planner_stats
from ..dispatch import RETRY_AFTER_RESCHEDULE_CAP
from ..issue_rows import insert_issues, issue_for
from ..knobs import knob
from ..models import Audit, ChunkLease, FrontierURL, Issue, LinkEdge, Page
from ..sql import insert_rows
from . import admission, reuse
from .db_retry import DatabaseBusy, DatabaseDown, with_db_retry
from .progress import fill_slots, lock_running, page_budget, record_lost
from .robots_refresh import refuse_disallowed
from .rows import PAGE_COLUMNS, PAGE_UPDATE_FIELDS, clean, page_values
from .setup import MAX_RESCHEDULES, CrawlSetup

log = logging.getLogger(__name__)

EDGE_COLUMNS = ["audit_id", "source_hash", "source_url", "target_hash", "target_url", "tag", "anchor_text",
                "nofollow", "internal", "fragments"]
# A top-up may lease this many URLs per page it may lease, the rest checks: a
# HEAD check costs a small part of a page's fetch, parse and rows.
TOP_UP_URLS_PER_PAGE = 4
# Top-up leases in a row that robots.txt rules read during the crawl may refuse whole.
REFUSED_LEASES = 3
# A page depth cap no page meets: a top-up of checks only.
NO_PAGES = -1
# Where a page row holds its canonical: admission checks the target the row names, resolved once (rows).
CANONICAL, CANONICAL_HASH = PAGE_COLUMNS.index("canonical"), PAGE_COLUMNS.index("canonical_hash")


class LeaseLost(Exception):
    """Our lease was reclaimed (we are a zombie): write nothing more."""


class AuditStopped(Exception):
    """The audit was cancelled or failed while this chunk ran."""


class ClusterStopping(Exception):
    """Our cluster is stopping (SIGTERM): hand the chunk's URLs back for another cluster."""


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    """A leased frontier URL as the window runs it."""

    id: int
    url: str
    url_hash: str
    kind: str
    depth: int
    in_sitemap: bool
    tries: int
    linked: bool = True


ITEM_FIELDS = [field.name for field in dataclasses.fields(Item)]


def items_of(rows) -> list[Item]:
    """Leased frontier ``rows`` in the order the window runs them (``spread_checks``)."""
    return spread_checks([Item(*row) for row in rows.order_by("depth", "id").values_list(*ITEM_FIELDS)])


def spread_checks(items: list[Item]) -> list[Item]:
    """Pages in their order (shallowest first), with the checks spread evenly between them.

    A lease's checks sit a click below its pages, so in lease order they would
    all come last and the window would run out of work before a top-up could
    arrive; spread out, the items left at any point take about as long as any
    others. Only pages set click depths, so their order is what must hold.
    """
    pages = [item for item in items if item.kind == Page.Kind.PAGE]
    checks = [item for item in items if item.kind != Page.Kind.PAGE]
    if not pages or not checks:
        return items
    spread: list[Item] = []
    taken = 0
    for n, page in enumerate(pages, 1):
        due = -(-n * len(checks) // len(pages))  # ceil(n * checks / pages) checks placed by the n-th page
        spread.append(page)
        spread.extend(checks[taken:due])
        taken = due
    return spread


class ChunkWriter:
    """Writes a chunk's sub-batches, each in one transaction fenced by the lease's token.

    Holds what the chunk knows about its leased URLs (kind and frontier id by
    hash), so a write need not read them back; a URL's entries go once its row
    is written, so they follow the URLs in flight, not every URL of the chunk.
    """

    def __init__(self, audit: Audit, lease: ChunkLease, setup: CrawlSetup, on_batch=None, dispatcher=None):
        self.audit = audit
        self.lease = lease
        self.setup = setup
        self.on_batch = on_batch
        # Given when the audit's chunks may run side by side: what a write
        # queues can then start more of them at once.
        self.dispatcher = dispatcher
        self.kinds: dict[str, str] = {}
        self.ids: dict[str, int] = {}
        self.patterns = (compile_patterns(setup.include), compile_patterns(setup.exclude, most=CRAWL_MAX_PATTERNS))
        # How deep top_up may lease pages: the deepest linked page of the first lease.
        self.depth_cap: int | None = None
        # Set once a write gave up on the database: later calls fail at once.
        self.db_failure: Exception | None = None
        # A delta crawl's source audit, and the validators of the held pages it stored.
        self.source = reuse.source_of(audit)
        self.previous: dict[str, Validators] = {}

    def _retrying(self, fn, *args, what: str):
        """``fn(*args)`` through ``with_db_retry``; after one gave up, the same failure at once."""
        if self.db_failure is not None:
            raise type(self.db_failure)(str(self.db_failure))
        try:
            return with_db_retry(fn, *args, what=f"audit {self.audit.pk} chunk {self.lease.number} {what}")
        except (DatabaseBusy, DatabaseDown) as exc:
            self.db_failure = exc
            raise

    def hold(self, items: list[Item]) -> None:
        """Take on leased ``items``: their kinds and frontier ids are known from here on."""
        self.kinds.update((item.url_hash, item.kind) for item in items)
        self.ids.update((item.url_hash, item.id) for item in items)
        if self.source is not None:
            self.previous.update(reuse.validators(
                self.source, [item.url_hash for item in items if item.kind == Page.Kind.PAGE]))
        if self.depth_cap is None and items:
            # Linked pages only: a resource sits a click below the page that links
            # it, and a sitemap-only page may sit anywhere, so either would let
            # top-ups reach pages too deep. Without one, top-ups are checks only.
            depths = [item.depth for item in items if item.kind == Page.Kind.PAGE and item.linked]
            self.depth_cap = max(depths) if depths else NO_PAGES

    def top_up(self) -> list[Item]:
        """More URLs for this chunk (``_top_up``), retried while the database is busy or away."""
        return self._retrying(self._top_up, what="top-up")

    def _top_up(self) -> list[Item]:
        """More URLs for this chunk while its last ones run; [] when there are none to give.

        Pages no deeper than the chunk's first lease, because their links set the
        next pages' click depth: a deeper page written before a shallower one
        linking the same new URL would give that URL too deep a depth. Leased
        like any lease, so a retry of the chunk re-receives what it held.
        """
        if self.depth_cap is None:
            return []
        with transaction.atomic():
            self._fence()
            if not self.audit.running_now():
                raise AuditStopped()
            size = knob("CHUNK_SIZE")
            # A lease robots.txt, read again, refused whole is no end of the work: lease again (a few times).
            for _ in range(REFUSED_LEASES):
                ids = FrontierURL.objects.lease_next(
                    self.lease, size, budget=page_budget(self.audit), page_depth_cap=self.depth_cap,
                    url_limit=size * TOP_UP_URLS_PER_PAGE,
                )
                if not ids:
                    return []
                items = items_of(FrontierURL.objects.held_by(self.lease).filter(id__in=ids))
                items = refuse_disallowed(self.audit, self.setup.robots, self.setup.user_agent, self.lease, items)
                if items:
                    break
            self.lease.count_urls(len(items), more=True)
        self.hold(items)
        return items

    def drop_poison(self, items: list[Item]) -> list[Item]:
        """Serial (retry) mode: a URL still marked from the last try is the one that killed the worker."""
        poison = [item for item in items if item.tries > 0]
        if poison:
            self._retrying(self._record_poison, poison, what="poison record")
        return [item for item in items if item.tries == 0]

    def _record_poison(self, poison: list[Item]) -> None:
        with transaction.atomic():
            self._fence()
            record_lost(self.audit, list(FrontierURL.objects.filter(id__in=[i.id for i in poison])))

    def mark_try(self, item: Item) -> None:
        """Serial mode: mark ``item`` before it is fetched."""
        self._retrying(self._mark_try, item, what="try mark")

    def _mark_try(self, item: Item) -> None:
        with transaction.atomic():
            self._fence()
            FrontierURL.objects.filter(id=item.id).mark_tried()

    def _fence(self) -> None:
        if not self.lease.fence(knob("LEASE_SECONDS")):
            raise ClusterStopping() if self.lease.stopping() else LeaseLost()

    def write(self, outcomes: list[PageOutcome]) -> None:
        """Store one sub-batch (``_store``), retried while the database is busy or away; then the audit's state."""
        outcomes, issues, kinds = self._retrying(self._store, outcomes, what="write")
        self._forget(outcomes)
        if self.on_batch:
            self.on_batch(outcomes, issues, kinds)
        # A cancel (or a watchdog failure) is seen here, between sub-batches:
        # within seconds, since a sub-batch is flushed at least every second.
        status, pages = self._retrying(
            lambda: Audit.objects.filter(pk=self.audit.pk).values_list("status", "pages_discovered").first(),
            what="status check") or (None, 0)
        if status != Audit.Status.RUNNING:
            raise AuditStopped()
        self._retrying(planner_stats.keep_up, self.audit.pk, pages, what="planner statistics")

    def _at_current_depth(self, outcomes: list[PageOutcome]) -> list[PageOutcome]:
        """Pages at the depth limit, at the depth their frontier row has now: a chunk beside this one (or an
        earlier sub-batch) may have reached one by a shorter path since it was leased, and at the limit its
        links would be dropped as too deep. Deeper pages' depths finalize settles (``depths.settle``)."""
        edge = [url_hash(o.url) for o in outcomes if o.depth >= self.audit.max_depth and o.outlinks]
        if not edge:
            return outcomes
        now = dict(FrontierURL.objects.filter(audit=self.audit, url_hash__in=edge, depth__lt=self.audit.max_depth)
                   .values_list("url_hash", "depth"))
        return [dataclasses.replace(o, depth=now[digest]) if (digest := url_hash(o.url)) in now else o
                for o in outcomes]

    def _forget(self, outcomes: list[PageOutcome]) -> None:
        """Drop what ``hold`` kept for URLs now stored (a rescheduled one is held again when re-leased)."""
        for o in outcomes:
            digest = url_hash(o.url)
            self.kinds.pop(digest, None)
            self.ids.pop(digest, None)
            self.previous.pop(digest, None)

    def _store(self, outcomes: list[PageOutcome]) -> tuple[list[PageOutcome], list[Issue], list[str]]:
        """Pages, issues, links, new frontier rows, counters; the URLs marked done: one fenced transaction.

        Returns the outcomes stored, their issues, and each outcome's kind as stored."""
        with transaction.atomic():
            self._fence()
            outcomes, pause = self._reschedule_rate_limited(outcomes)
            outcomes = self._at_current_depth(outcomes)
            carried: dict[str, reuse.Carried] = {}
            if self.source is not None:
                outcomes, carried = reuse.revive(self.audit.pk, self.source, outcomes, self.setup)
            pages, canonicals = self._write_pages(outcomes, carried)
            issues = self._write_issues(outcomes, pages, carried)
            discovered = self._write_links(outcomes, carried, canonicals)
            hashes = list(pages)
            ids = [self.ids[digest] for digest in hashes if digest in self.ids]
            done = FrontierURL.objects.held_by(self.lease)
            done = done.filter(id__in=ids) if len(ids) == len(hashes) else done.filter(url_hash__in=hashes)
            resources = [digest for digest, (_, kind) in pages.items() if kind == Page.Kind.RESOURCE]
            if resources:
                # A link made it a page while we checked it (admission): it stays ours, to hand back.
                done = done.exclude(kind=Page.Kind.PAGE, url_hash__in=resources)
            if done.mark_done() < len(hashes) and resources:
                self._hand_back_pages(resources)
            page_results = [o for o in outcomes if pages[url_hash(o.url)][1] == Page.Kind.PAGE]
            severities = [issue.severity for issue in issues]
            self.audit.beat(
                pages_crawled=len(page_results),
                pages_failed=sum(1 for o in page_results if o.result.error is not None),
                pages_discovered=discovered,
                issues_critical=severities.count("critical"), issues_warning=severities.count("warning"),
                issues_notice=severities.count("notice"),
            )
            if pause:
                # The site asked to be left alone, not only for these URLs: the window holds the rest of this
                # chunk, and the stored pause the audit's next chunks, on whatever worker they run. Here,
                # where the counters lock the audit's row anyway: never earlier than other chunks take it.
                self.audit.pause_site(pause)
            if discovered and self.dispatcher is not None:
                fill_slots(self.audit, self.dispatcher)
        return outcomes, issues, [pages[url_hash(o.url)][1] for o in outcomes]

    def _hand_back_pages(self, resources: list[str]) -> None:
        """Resources a link made pages while this chunk held them: back to the frontier, to be fetched as pages.

        Their check is not kept, so the page's fetch writes a fresh row at its own depth.
        """
        held = FrontierURL.objects.held_by(self.lease).filter(url_hash__in=resources, kind=Page.Kind.PAGE)
        Page.objects.filter(audit=self.audit, url_hash__in=held.values("url_hash")).delete()
        held.release(forget_tries=True)  # checked whole as a resource: no worker died on it

    def _reschedule_rate_limited(self, outcomes: list[PageOutcome]) -> tuple[list[PageOutcome], float]:
        """Put URLs the site asked us to come back to later back in the frontier; return the rest, and the
        longest wait the site asked of the audit's own URLs (0 when none: its pause, ``Audit.pause_site``).

        A URL goes back at most MAX_RESCHEDULES times; after that it is stored
        as rate_limited. External links are stored rate_limited at once:
        another site's throttling is not worth holding the audit open for.
        """
        asked = {url_hash(o.url): o for o in outcomes
                 if o.result.error is FetchError.RATE_LIMITED and o.result.retry_after is not None}
        if not asked:
            return outcomes, 0.0
        ours = FrontierURL.objects.held_by(self.lease).filter(url_hash__in=list(asked)).exclude(
            kind=Page.Kind.EXTERNAL)
        spent = dict(ours.values_list("url_hash", "reschedules"))
        pause = min(max((asked[digest].result.retry_after for digest in spent), default=0.0),
                    RETRY_AFTER_RESCHEDULE_CAP)
        later: dict[int, list[str]] = {}
        for digest, count in spent.items():
            if count < MAX_RESCHEDULES:
                # Whole seconds, so one UPDATE serves every URL given the same wait.
                later.setdefault(math.ceil(asked[digest].result.retry_after), []).append(digest)
        for seconds, hashes in later.items():
            ours.filter(url_hash__in=hashes).reschedule(seconds)
        rescheduled = {digest for hashes in later.values() for digest in hashes}
        kept = []
        for o in outcomes:
            digest = url_hash(o.url)
            if digest in rescheduled:
                continue
            if digest in spent:
                detail = f"{o.result.error_detail}; still rate limited after {spent[digest]} reschedules"
                o = dataclasses.replace(o, result=dataclasses.replace(o.result, error_detail=detail))
            kept.append(o)
        return kept, pause

    def _write_pages(self, outcomes: list[PageOutcome], carried: dict[str, reuse.Carried],
                     ) -> tuple[dict[str, tuple[int, str]], dict[str, tuple[str, str]]]:
        """Store the sub-batch's page rows; their (id, kind) by URL hash, and the pages' stored canonical
        (URL, hash) by page URL, for admission to check the target the row names."""
        hashes = [url_hash(o.url) for o in outcomes]
        kinds = self.kinds
        if not all(digest in kinds for digest in hashes):
            kinds = dict(FrontierURL.objects.filter(audit=self.audit, url_hash__in=hashes)
                         .values_list("url_hash", "kind"))
        kinds = {digest: kinds.get(digest, Page.Kind.PAGE) for digest in hashes}
        # A retried chunk re-writes the rows of URLs an earlier try stored.
        rows = [page_values(self.audit.pk, o, kinds[digest], carried.get(digest))
                for o, digest in zip(outcomes, hashes, strict=True)]
        # kind too: a resource's row becomes a page's when a link made it one (admission).
        insert_rows(Page, PAGE_COLUMNS, rows,
                    conflict=["audit_id", "url_hash"], update=[*PAGE_UPDATE_FIELDS, "kind"])
        ids = Page.objects.filter(audit=self.audit, url_hash__in=hashes).values_list("url_hash", "id")
        canonicals = {o.url: (row[CANONICAL], row[CANONICAL_HASH])
                      for o, digest, row in zip(outcomes, hashes, rows, strict=True)
                      if row[CANONICAL] and kinds[digest] == Page.Kind.PAGE}
        return {digest: (pk, kinds[digest]) for digest, pk in ids}, canonicals

    def _write_issues(self, outcomes: list[PageOutcome], pages: dict[str, tuple[int, str]],
                      carried: dict[str, reuse.Carried]) -> list[Issue]:
        issues = [issue_for(self.audit.pk, pages[url_hash(o.url)][0], o.url, f)
                  for o in outcomes for f in o.findings]
        # An unchanged page keeps its page-level issues, under the same keys.
        issues += [Issue(audit_id=self.audit.pk, page_id=pages[digest][0], url_hash=digest, **issue)
                   for digest, kept in carried.items() for issue in kept.issues]
        insert_issues(issues)
        return issues

    def _write_links(self, outcomes: list[PageOutcome], carried: dict[str, reuse.Carried],
                     canonicals: dict[str, tuple[str, str]]) -> int:
        """Link edges for every outlink; new frontier rows for what the crawl should fetch.

        A reused page's edges are copied from its source audit in the database
        (its ``outlinks`` hold only the links admission may act on).
        """
        origin = self.setup.scope.origin if self.setup.scope else None
        inside = f"{origin}/" if origin else None
        # Parsed pages, and redirects (whose one outlink is where they landed).
        parsed = [(url_hash(o.url), o) for o in outcomes if o.facts is not None or o.outlinks]
        edges = [
            (self.audit.pk, source, o.url, url_hash(link.url), link.url, link.tag,
             clean(link.text, 200), link.nofollow, inside is not None and link.url.startswith(inside),
             "\n".join(link.fragments))  # capped, and without NULs or newlines (crawler.anchors)
            for source, o in parsed if source not in carried for link in o.outlinks
        ]
        # A retried page replaces the edges an earlier try wrote; the fence makes
        # this transaction the only writer of these sources.
        sources = [source for source, _ in parsed]
        for start in range(0, len(sources), admission.LOOKUP_BATCH):
            LinkEdge.objects.filter(audit=self.audit, source_hash__in=sources[start:start + admission.LOOKUP_BATCH]).delete()
        write_edges(edges)
        if carried:
            reuse.copy_edges(self.audit.pk, self.source, list(carried))
        if self.audit.mode == Audit.Mode.VALIDATE:
            return 0  # a validation fetches what it was seeded with and follows no link
        if self.dispatcher is not None:
            # Chunks running side by side admit one at a time, on the audit row's
            # lock (taken by the counters anyway): two inserting the same new
            # URLs in different orders would deadlock, and the depths they
            # lower must not cross.
            lock_running(self.audit)
        return admission.admit(self.audit, self.setup, outcomes, self._crawlable, canonicals)

    def _crawlable(self, url: str) -> bool:
        """Include/exclude patterns, searched against the (already normalised) URL."""
        include, exclude = self.patterns
        if include and not any(p.search(url) for p in include):
            return False
        return not any(p.search(url) for p in exclude)


def write_edges(rows: list[tuple]) -> None:
    """Append link edges (tuples in EDGE_COLUMNS order), about a hundred a page.

    PostgreSQL takes them through COPY, elsewhere ``insert_rows``. Nothing can
    conflict: the table has no unique key but its id.
    """
    if connection.vendor != "postgresql":
        insert_rows(LinkEdge, EDGE_COLUMNS, rows)
        return
    quote = connection.ops.quote_name
    columns = ", ".join(quote(c) for c in EDGE_COLUMNS)
    # COPY runs on psycopg's own cursor, outside Django's error wrapping: wrap it
    # here, so a lost connection is a django.db OperationalError like any other.
    with connection.wrap_database_errors, connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {quote(LinkEdge._meta.db_table)} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)

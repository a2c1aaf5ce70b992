"""The crawl's scratch state: the frontier (the dedup set and work queue) and chunk leases.

Every state change is a conditional UPDATE whose WHERE clause is the guard: of
two workers racing, exactly one matches.
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta

from django.db import models, transaction
from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Now
from django.utils import timezone

from .audit import Audit, not_stamped_since
from .results import Page

# Set by the qcluster command for its workers: the cluster's id on the leases they hold.
CLUSTER_ID_VARIABLE = "SITEWARD_CLUSTER_ID"


class FrontierQuerySet(models.QuerySet):
    """Frontier rows, with the lease and Retry-After rules judged by the database clock."""

    # The share of max_pages kept for sitemap-only pages (orphan and bad-URL
    # checks need them fetched): 10%, at least 20 pages, and never more than half
    # the budget, so a small audit still follows the site's links.
    SITEMAP_RESERVE_PERCENT = 10
    SITEMAP_RESERVE_MIN = 20

    @staticmethod
    def sitemap_reserve(max_pages: int) -> int:
        """Pages of ``max_pages`` that link-found pages may not take while sitemap-only pages wait."""
        share = -(-max_pages * FrontierQuerySet.SITEMAP_RESERVE_PERCENT // 100)
        return max(0, min(max_pages // 2, max(FrontierQuerySet.SITEMAP_RESERVE_MIN, share)))

    def due(self):
        """Rows no Retry-After holds back (never rate limited, or their wait is over)."""
        return self.filter(Q(not_before__isnull=True) | Q(not_before__lte=Now()))

    def links_to_follow(self, audit_id: int) -> bool:
        """Whether link-found pages are still to crawl: due, or held by an open chunk (of any cluster).

        Sitemap-only pages wait for them: such a page is seeded at max_depth,
        and crawled there, its links would go nowhere before a link reaches it at its click depth.
        """
        linked = self.filter(audit_id=audit_id, kind=Page.Kind.PAGE, linked=True)
        open_chunks = ChunkLease.objects.open_for(audit_id).values("number")
        return (linked.filter(state=FrontierURL.State.LEASED, chunk__in=open_chunks).exists()
                or linked.filter(state=FrontierURL.State.PENDING).due().exists())

    def waiting(self):
        """Rows still waiting out a Retry-After."""
        return self.filter(not_before__gt=Now())

    def held_by(self, lease: ChunkLease):
        """The rows chunk ``lease`` holds: what a retry of it re-receives."""
        return self.filter(audit_id=lease.audit_id, chunk=lease.number, state=FrontierURL.State.LEASED)

    def lease_next(self, lease: ChunkLease, limit: int, *, budget: int, page_depth_cap: int | None = None,
                   url_limit: int | None = None) -> list[int]:
        """Lease up to ``limit`` pending pages of the audit (and checks) to chunk ``lease``; their ids.

        Shallowest first. At most ``budget`` fresh pages go (the audit's page
        budget); resource and external checks, and pages rescheduled after a
        Retry-After (they already hold their place in the budget), go whatever
        it says. Link-found pages may not take the sitemap reserve
        (``sitemap_reserve``) while sitemap-only pages wait for it. With
        ``page_depth_cap`` (a top-up) deeper pages stay pending;
        with ``url_limit``, up to that many URLs go, of which at most ``limit``
        pages. The rows are locked as they are chosen, so the ids returned are
        exactly the ones this chunk got.
        """
        with transaction.atomic():
            return self._lease_next(lease, limit, budget, page_depth_cap, url_limit)

    def _lease_next(self, lease: ChunkLease, limit: int, budget: int, page_depth_cap: int | None,
                    url_limit: int | None) -> list[int]:
        pending = self.filter(audit_id=lease.audit_id, state=FrontierURL.State.PENDING).due()
        if page_depth_cap is not None:
            pending = pending.filter(~Q(kind=Page.Kind.PAGE) | Q(depth__lte=page_depth_cap))
        cap = budget
        if budget <= 0:
            pending = pending.exclude(kind=Page.Kind.PAGE, reschedules=0)
        elif (linked_budget := budget - self._sitemap_held_back(lease.audit_id, budget, limit)) <= 0:
            # Down to the sitemap reserve: only sitemap-only pages (and checks,
            # rescheduled pages) go, so orphans and bad sitemap URLs get fetched.
            pending = pending.exclude(kind=Page.Kind.PAGE, linked=True, reschedules=0)
        elif FrontierURL.objects.links_to_follow(lease.audit_id):
            # Pages reached through links go first, so a page both in the sitemap
            # and linked is crawled at its click depth; sitemap-only pages (orphan
            # candidates) wait until links have nothing more to give, in this chunk
            # or one beside it, or only the sitemap reserve is left.
            pending = pending.exclude(kind=Page.Kind.PAGE, linked=False)
            cap = linked_budget
        # Chunks of one audit running at once skip the rows another is leasing
        # (PostgreSQL); SQLite has one writer at a time and ignores the clause.
        rows = pending.order_by("depth", "id").select_for_update(skip_locked=True, of=("self",)).values_list(
            "id", "kind", "reschedules")
        ids, pages, counted = [], 0, 0
        for row_id, kind, reschedules in rows[:max(limit, url_limit or 0)]:
            if kind == Page.Kind.PAGE:
                pages += 1
                if pages > limit:  # a top-up's extra room is for checks
                    continue
                if not reschedules:
                    counted += 1
                    if counted > cap:
                        continue
            ids.append(row_id)
        self.filter(id__in=ids, state=FrontierURL.State.PENDING).update(
            state=FrontierURL.State.LEASED, chunk=lease.number)
        return ids

    def _sitemap_held_back(self, audit_id: int, budget: int, limit: int) -> int:
        """The part of ``budget`` link-found pages may not take: the sitemap reserve, or less when fewer wait.

        Read only when the reserve could bind this lease (budget - reserve <
        limit), i.e. near max_pages where page_budget is exact. Sitemap-only
        pages are seeded at max_depth (start), so the lease-order index narrows
        the count to that level, and it stops at the reserve.
        """
        max_pages, max_depth = Audit.objects.filter(pk=audit_id).values_list("max_pages", "max_depth").get()
        reserve = self.sitemap_reserve(max_pages)
        if reserve <= 0 or budget - reserve >= limit:
            return 0
        waiting = FrontierURL.objects.filter(
            audit_id=audit_id, state=FrontierURL.State.PENDING, depth=max_depth, kind=Page.Kind.PAGE,
            linked=False, in_sitemap=True, reschedules=0, skip_reason="")
        return waiting[:reserve].count()

    def release(self, *, forget_tries: bool = False) -> int:
        """Hand these rows back: pending, held by no chunk. ``forget_tries`` clears the serial-mode
        marks too, for URLs that killed no worker (a chunk given back, a check that must run again)."""
        changes = {"tries": 0} if forget_tries else {}
        return self.update(state=FrontierURL.State.PENDING, chunk=None, **changes)

    def mark_tried(self) -> int:
        """Count a try of these rows before they are fetched (a serial retry): one still
        marked on the next try is the URL that killed its worker."""
        return self.update(tries=F("tries") + 1)

    def mark_done(self) -> int:
        """These rows were fetched and written (or given up): no chunk leases them again."""
        return self.update(state=FrontierURL.State.DONE)

    def hold_for_start(self) -> int:
        """The start page and typed URLs, leased to "chunk 0", the start step's own fenced write."""
        return self.update(depth=0, linked=True, state=FrontierURL.State.LEASED, chunk=0)

    def pages_counted(self, audit: Audit) -> int:
        """Pages that used up the page budget: fetched, being fetched, or rescheduled after a Retry-After."""
        return self.filter(audit=audit, kind=Page.Kind.PAGE).exclude(
            state=FrontierURL.State.PENDING, reschedules=0).exclude(skip_reason__gt="").count()

    def reschedule(self, seconds: float) -> int:
        """Back to pending for ``seconds`` (a Retry-After), counting the reschedule.

        ``tries`` is cleared: the fetch came back, so the URL did not kill its
        worker, and a serial retry must not take it for a poison URL.
        """
        return self.update(
            state=FrontierURL.State.PENDING, chunk=None, not_before=Now() + timedelta(seconds=seconds),
            reschedules=F("reschedules") + 1, tries=0,
        )


class FrontierURL(models.Model):
    """A URL the crawl will fetch, is fetching, or has fetched (the dedup set)."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        LEASED = "leased", "Leased"
        DONE = "done", "Done"

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="frontier", db_index=False)
    url_hash = models.CharField(max_length=32)
    url = models.TextField()
    kind = models.CharField(max_length=10, choices=Page.Kind.choices, default=Page.Kind.PAGE)
    depth = models.PositiveSmallIntegerField(default=0)
    found_on = models.TextField(blank=True)
    template_key = models.CharField(max_length=32, blank=True)
    in_sitemap = models.BooleanField(default=False)
    linked = models.BooleanField(default=False, help_text="Reached through an internal link")
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    chunk = models.PositiveIntegerField(null=True, blank=True)
    skip_reason = models.CharField(max_length=32, blank=True, help_text="Why it was not fetched")
    # Set before the URL is fetched when its chunk is on a retry after a worker
    # death: a URL that is still marked on the next try is the one killing workers.
    tries = models.PositiveSmallIntegerField(default=0)
    # A rate-limited URL goes back to pending until the time its Retry-After
    # named (database clock), at most MAX_RESCHEDULES times (audits.crawl.setup).
    not_before = models.DateTimeField(null=True, blank=True)
    reschedules = models.PositiveSmallIntegerField(default=0)

    objects = FrontierQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["audit", "url_hash"], name="frontier_unique_url_per_audit"),
        ]
        # Every URL is inserted pending, leased, then marked done, and an update
        # that changes an indexed column (state, chunk) adds an entry to every
        # index whose condition the new row meets. So the lease and chunk
        # indexes hold only the rows in the state they look for, and the
        # template index only pages: a resource check's row then costs 8
        # index entries over its life instead of 15.
        indexes = [
            # Leasing the next chunk: pending URLs of an audit, shallowest first.
            models.Index(fields=["audit", "depth", "id"], name="frontier_lease_order",
                         condition=Q(state="pending")),
            # A retried chunk re-receives exactly the URLs it held (and resume
            # releases every held URL of an audit).
            models.Index(fields=["audit", "chunk"], name="frontier_audit_chunk", condition=Q(state="leased")),
            # Trap budget: variants queued per path template (only pages have one).
            models.Index(fields=["audit", "template_key"], name="frontier_audit_template",
                         condition=Q(kind="page")),
            # URLs waiting out a Retry-After: when the next chunk is due (advance,
            # retry_wait) and which audits are waiting rather than stalled (the
            # watchdog). Only rows ever rate limited are indexed: a handful.
            models.Index(fields=["audit", "not_before"], name="frontier_retry_after",
                         condition=Q(not_before__isnull=False)),
        ]

    def __str__(self):
        return f"{self.url} ({self.state})"


class ChunkLeaseQuerySet(models.QuerySet):
    def claim(self, audit_id: int, number: int, *, seconds: int, max_attempts: int) -> ChunkLease | None:
        """Take chunk ``number`` with one conditional UPDATE, or refuse (None).

        The claim counts the attempt, sets a fresh owner token and an expiry by
        the database clock. A finished chunk, a live lease or a spent attempt
        budget matches no row, so of two workers racing, exactly one wins.
        """
        claimable = Q(state=ChunkLease.State.QUEUED) | Q(state=ChunkLease.State.LEASED, leased_until__lt=Now())
        updated = self.filter(claimable, audit_id=audit_id, number=number, attempts__lt=max_attempts).update(
            state=ChunkLease.State.LEASED, token=uuid.uuid4(), attempts=F("attempts") + 1,
            leased_until=Now() + timedelta(seconds=seconds), worker_pid=os.getpid(), started_at=Now(),
            cluster=os.environ.get(CLUSTER_ID_VARIABLE, ""), stop_requested=False,
        )
        return self.get(audit_id=audit_id, number=number) if updated else None

    def open_for(self, audit_id: int):
        """The audit's chunks queued or running: the slots ``CHUNKS_PER_AUDIT`` counts."""
        return self.filter(audit_id=audit_id, state__in=[ChunkLease.State.QUEUED, ChunkLease.State.LEASED])

    def void(self) -> int:
        """End these chunks unfinished: abandoned, their owner tokens void, so a worker still
        running one can write nothing more (its fence fails). Done chunks stay done."""
        return self.exclude(state=ChunkLease.State.DONE).update(state=ChunkLease.State.ABANDONED, token=None)

    def request_stop(self, cluster: str) -> int:
        """Ask the chunks ``cluster`` is running to hand their URLs back at their next write (it is stopping)."""
        if not cluster:
            return 0
        return self.filter(cluster=cluster, state=ChunkLease.State.LEASED).update(stop_requested=True)


class ChunkLease(models.Model):
    """Who is crawling chunk ``number`` of an audit, until when, and how many tries it took."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        LEASED = "leased", "Leased"
        DONE = "done", "Done"
        ABANDONED = "abandoned", "Abandoned"

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="chunks", db_index=False)
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    token = models.UUIDField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    worker_pid = models.PositiveIntegerField(null=True, blank=True)
    url_count = models.PositiveIntegerField(default=0)
    # Which cluster runs it (the qcluster command's id), and whether that cluster
    # is stopping: the chunk then hands its URLs back instead of holding them
    # until its lease runs out.
    cluster = models.CharField(max_length=32, blank=True)
    stop_requested = models.BooleanField(default=False)
    # This chunk's part of the audit's concurrency while several chunks run at
    # once (``rebalance``): what its peers may not use.
    share = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ChunkLeaseQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["audit", "number"], name="chunk_unique_number_per_audit"),
        ]
        indexes = [
            # The watchdog looks for expired leases.
            models.Index(fields=["state", "leased_until"], name="chunk_state_leased_until"),
        ]

    def __str__(self):
        return f"chunk {self.number} of audit {self.audit_id} ({self.state})"

    def fence(self, seconds: int) -> bool:
        """Extend the lease by ``seconds``, only while we still own it (the owner token) and may go on.

        Every write of a chunk calls this first inside its transaction; False
        means the lease was reclaimed from us and nothing may be written, or
        that our cluster is stopping (``stopping``).
        """
        return ChunkLease.objects.filter(pk=self.pk, token=self.token, state=self.State.LEASED,
                                         stop_requested=False).update(
            leased_until=Now() + timedelta(seconds=seconds)
        ) == 1

    def rebalance(self, cap: int, in_flight: int) -> tuple[int, int] | None:
        """This chunk's part of the audit's ``cap`` requests in flight: (limit, chunks sharing), or None if not ours.

        Under the audit row's lock, so two chunks never hand out the same room.
        A chunk takes its fair part (cap split between the live chunks) as far
        as its peers' recorded shares leave room, and records the larger of
        that and what it still has in flight: a chunk shrinking to make room
        keeps its requests counted until they end, so the sum never passes cap.
        """
        with transaction.atomic():
            Audit.objects.select_for_update().filter(pk=self.audit_id).values_list("pk", flat=True).first()
            peers = ChunkLease.objects.filter(audit_id=self.audit_id, state=self.State.LEASED,
                                              leased_until__gt=Now()).exclude(pk=self.pk)
            taken = peers.aggregate(n=Count("id"), used=Sum("share"))
            parts = taken["n"] + 1
            limit = max(0, min(max(1, cap // parts), cap - (taken["used"] or 0)))
            mine = ChunkLease.objects.filter(pk=self.pk, token=self.token, state=self.State.LEASED)
            if not mine.update(share=max(limit, in_flight)):
                return None
        return limit, parts

    def stopping(self) -> bool:
        """Whether we still own the lease and our cluster asked us to hand it back."""
        return ChunkLease.objects.filter(pk=self.pk, token=self.token, state=self.State.LEASED,
                                         stop_requested=True).exists()

    def release(self, ids: list[int] | None = None) -> None:
        """Hand URLs this chunk holds (``ids``, or all) back to the frontier, if we still own it.

        A hand-back (a cancel, a cluster stopping, a lost session) is no worker's
        death: a serial retry's mark on the URL being fetched is cleared, or a
        later retry would record that URL as the one that killed its worker.
        """
        with transaction.atomic():
            # Locked: a reclaim that hands the lease to a new owner waits until these rows are back.
            if not ChunkLease.objects.select_for_update().filter(pk=self.pk, token=self.token).exists():
                return
            rows = FrontierURL.objects.held_by(self)
            if ids is not None:
                rows = rows.filter(id__in=ids)
            rows.release(forget_tries=True)

    def finish(self) -> bool:
        """Mark the chunk done and release every URL it still holds; False if we no longer own it.

        What a chunk wrote is done already, so what it still holds it never
        finished: the window's unfinished items, and any a top-up leased as
        the crawl was ending, which the window never received.
        """
        with transaction.atomic():
            done = ChunkLease.objects.filter(pk=self.pk, token=self.token, state=self.State.LEASED).update(
                state=self.State.DONE, finished_at=Now())
            if not done:
                return False
            FrontierURL.objects.held_by(self).release()
        self.state = self.State.DONE
        return True

    def give_back(self) -> bool:
        """Hand the chunk back unfinished WITHOUT counting this attempt; False if we no longer own it.

        For a chunk that could not write (the database stayed busy): the lease
        goes back to queued with the claim's attempt taken back, its URLs to the
        frontier (their serial-mode marks cleared: they killed nobody), and
        ``created_at`` restarts the watchdog's grace before it is enqueued again.
        """
        with transaction.atomic():
            given = ChunkLease.objects.filter(pk=self.pk, token=self.token, state=self.State.LEASED).update(
                state=self.State.QUEUED, token=None, leased_until=None, attempts=F("attempts") - 1,
                created_at=Now())
            if not given:
                return False
            FrontierURL.objects.held_by(self).release(forget_tries=True)
        self.state = self.State.QUEUED
        return True

    def abandon(self) -> bool:
        """Give up a chunk whose lease expired with its attempts spent; False if someone else did."""
        return ChunkLease.objects.filter(pk=self.pk, state=self.State.LEASED, leased_until__lt=Now()).update(
            state=self.State.ABANDONED, token=None, finished_at=Now()) == 1

    def count_urls(self, count: int, *, more: bool = False) -> None:
        """Record how many URLs this chunk holds (``more``: that many more, from a top-up)."""
        ChunkLease.objects.filter(pk=self.pk, token=self.token).update(
            url_count=F("url_count") + count if more else count)

    def reopen(self, now) -> bool:
        """Queue again a chunk whose lease expired (its worker died); False if another watchdog did first."""
        return ChunkLease.objects.filter(pk=self.pk, state=self.State.LEASED, leased_until__lt=Now(),
                                         attempts=self.attempts).update(state=self.State.QUEUED,
                                                                        created_at=now) == 1

    def requeue(self, now) -> bool:
        """Restart the grace of a queued chunk whose task vanished; False if another watchdog did first."""
        return ChunkLease.objects.filter(not_stamped_since("created_at", self.created_at), pk=self.pk,
                                         state=self.State.QUEUED).update(created_at=now) == 1

    def expired(self) -> bool:
        """Whether the lease has run out, by the database clock."""
        return ChunkLease.objects.filter(pk=self.pk, leased_until__lt=Now()).exists()

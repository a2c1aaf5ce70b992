"""Siteward's data: audits, the pages and issues they found, and the crawl's lease tables.

State changes are model methods built on conditional UPDATEs (``WHERE status IN
…``) so two processes racing to make the same transition change the row once;
the loser sees ``False`` and does nothing.
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models, transaction
from django.db.models import Count, F, Q
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from crawler.catalogue import CATALOGUE
from crawler.types import FetchError as CrawlFetchError
from crawler.types import Severity as CrawlSeverity


class Severity(models.TextChoices):
    CRITICAL = CrawlSeverity.CRITICAL.value, "Critical"
    WARNING = CrawlSeverity.WARNING.value, "Warning"
    NOTICE = CrawlSeverity.NOTICE.value, "Notice"


# The issue vocabulary is the crawler's catalogue, so there is exactly one list.
IssueCode = models.TextChoices("IssueCode", [(code.upper(), (code, t.title)) for code, t in CATALOGUE.items()])
FetchErrorCode = models.TextChoices("FetchErrorCode", [(e.name, (e.value, e.label)) for e in CrawlFetchError])


class Audit(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        FINALIZING = "finalizing", "Finalizing"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    class Phase(models.TextChoices):
        QUEUED = "queued", "Waiting for a worker"
        STARTING = "starting", "Resolving the start URL, robots.txt and sitemaps"
        CRAWLING = "crawling", "Crawling"
        FINALIZING = "finalizing", "Cross-page checks"
        DONE = "done", "Done"

    class ErrorCode(models.TextChoices):
        START_URL_INVALID = "start_url_invalid", "Start URL is not a valid http(s) URL"
        START_URL_UNRESOLVABLE = "start_url_unresolvable", "Start URL's host does not resolve"
        START_URL_UNREACHABLE = "start_url_unreachable", "Start URL could not be fetched"
        SSRF_BLOCKED = "ssrf_blocked", "Start URL points at a refused (private or reserved) address"
        ROBOTS_UNREACHABLE = "robots_unreachable", "robots.txt is unreachable, so nothing may be crawled"
        SITE_UNAVAILABLE = "site_unavailable", "The start page never answered successfully"
        WORKER_LOST = "worker_lost", "The worker crawling it died repeatedly"
        STALLED = "stalled", "No progress for too long"
        DB_UNAVAILABLE = "db_unavailable", "The database was unavailable"
        STORAGE_FULL = "storage_full", "The database or disk is full"
        TIMEOUT = "timeout", "A task ran past its time limit"
        CANCELLED = "cancelled", "Cancelled by a person"
        INTERNAL_ERROR = "internal_error", "Internal error"
        UNKNOWN = "unknown", "Unknown failure"

    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.FINALIZING)
    ENDED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="audits")
    start_url = models.CharField(max_length=2048)
    origin = models.CharField(max_length=300, blank=True, help_text="Scheme and host after the start URL's redirects")

    # Limits the audit runs with.
    max_pages = models.PositiveIntegerField(default=500)
    max_depth = models.PositiveSmallIntegerField(default=10)
    concurrency = models.PositiveSmallIntegerField(default=8)
    rate = models.FloatField(null=True, blank=True, help_text="Requests per second; empty for no limit")
    include_patterns = models.TextField(blank=True, help_text="Regular expressions, one per line")
    exclude_patterns = models.TextField(blank=True, help_text="Regular expressions, one per line")
    user_agent = models.CharField(max_length=300, blank=True)
    respect_robots = models.BooleanField(default=True)
    check_external = models.BooleanField(default=True)
    allow_private = models.BooleanField(default=False, help_text="Allow private and loopback addresses")

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    phase = models.CharField(max_length=16, choices=Phase.choices, default=Phase.QUEUED)

    # Progress counters, bumped with F() by the chunk that did the work.
    pages_crawled = models.PositiveIntegerField(default=0)
    pages_discovered = models.PositiveIntegerField(default=0)
    pages_failed = models.PositiveIntegerField(default=0)
    issues_critical = models.PositiveIntegerField(default=0)
    issues_warning = models.PositiveIntegerField(default=0)
    issues_notice = models.PositiveIntegerField(default=0)
    current_window = models.PositiveSmallIntegerField(default=0)
    chunks_done = models.PositiveIntegerField(default=0)

    # What start learnt, kept so every chunk (in any process) makes the same decisions.
    robots_status = models.CharField(max_length=16, blank=True)
    robots_http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    robots_body = models.TextField(blank=True)
    sitemap_found = models.BooleanField(null=True)
    # Whether the audit's link edges are in Inlink (built after the audit ends; a resume clears it).
    links_indexed = models.BooleanField(default=False)

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    # Failure columns: filled on every failure path, including the ones only the watchdog sees.
    error_code = models.CharField(max_length=32, choices=ErrorCode.choices, blank=True)
    error_detail = models.TextField(blank=True)
    failed_phase = models.CharField(max_length=16, choices=Phase.choices, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The audit list: a person's audits, newest first.
            models.Index(fields=["owner", "-created_at"], name="audit_owner_created"),
            # The watchdog and the running-audit quota scan active audits.
            models.Index(fields=["status", "heartbeat_at"], name="audit_status_heartbeat"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(max_pages__gte=1), name="audit_max_pages_positive"),
            models.CheckConstraint(condition=Q(concurrency__gte=1), name="audit_concurrency_positive"),
        ]

    def __str__(self):
        return f"Audit {self.pk} of {self.start_url}"

    def get_absolute_url(self):
        return reverse("audit-detail", args=[self.pk])

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def issues_total(self) -> int:
        return self.issues_critical + self.issues_warning + self.issues_notice

    def patterns(self, which: str) -> list[str]:
        text = self.include_patterns if which == "include" else self.exclude_patterns
        return [line.strip() for line in text.splitlines() if line.strip()]

    # --- state transitions -------------------------------------------------

    def _transition(self, allowed_from, **changes) -> bool:
        """Apply ``changes`` only if the row is still in one of ``allowed_from``.

        The WHERE clause is the guard: of two processes racing, exactly one
        UPDATE matches. The instance is refreshed so callers see the outcome.
        """
        updated = Audit.objects.filter(pk=self.pk, status__in=list(allowed_from)).update(**changes)
        self.refresh_from_db()
        return updated == 1

    def start(self) -> bool:
        now = timezone.now()
        return self._transition(
            [self.Status.QUEUED], status=self.Status.RUNNING, phase=self.Phase.STARTING,
            started_at=now, heartbeat_at=now,
        )

    def begin_crawl(self, origin: str) -> bool:
        return self._transition(
            [self.Status.RUNNING], phase=self.Phase.CRAWLING, origin=origin, heartbeat_at=timezone.now()
        )

    def resume_crawl(self) -> bool:
        """Queued again after a failure or cancel: crawl on from the frontier."""
        return self._transition(
            [self.Status.QUEUED], status=self.Status.RUNNING, phase=self.Phase.CRAWLING,
            heartbeat_at=timezone.now(),
        )

    def begin_finalize(self) -> bool:
        return self._transition(
            [self.Status.RUNNING], status=self.Status.FINALIZING, phase=self.Phase.FINALIZING,
            heartbeat_at=timezone.now(),
        )

    def finish(self) -> bool:
        return self._transition(
            [self.Status.FINALIZING], status=self.Status.COMPLETED, phase=self.Phase.DONE,
            finished_at=timezone.now(), current_window=0,
        )

    def fail(self, code: str, detail: str = "", phase: str | None = None) -> bool:
        """Mark the audit failed with a code from ErrorCode; keeps everything crawled so far."""
        code = code if code in self.ErrorCode.values else self.ErrorCode.UNKNOWN
        current = Audit.objects.filter(pk=self.pk).values_list("phase", flat=True).first()
        return self._transition(
            self.ACTIVE, status=self.Status.FAILED, error_code=code, error_detail=detail[:4000],
            failed_phase=phase or current or self.Phase.QUEUED, finished_at=timezone.now(), current_window=0,
        )

    def cancel(self, detail: str = "Cancelled by a person.") -> bool:
        current = Audit.objects.filter(pk=self.pk).values_list("phase", flat=True).first()
        return self._transition(
            self.ACTIVE, status=self.Status.CANCELLED, error_code=self.ErrorCode.CANCELLED,
            error_detail=detail, failed_phase=current or self.Phase.QUEUED, finished_at=timezone.now(),
            current_window=0,
        )

    def reopen_for_resume(self) -> bool:
        """A failed or cancelled audit goes back to the queue, keeping its frontier and results."""
        return self._transition(
            [self.Status.FAILED, self.Status.CANCELLED], status=self.Status.QUEUED,
            phase=self.Phase.QUEUED, error_code="", error_detail="", failed_phase="",
            finished_at=None, heartbeat_at=timezone.now(), links_indexed=False,
        )

    COUNTERS = (
        "pages_crawled", "pages_discovered", "pages_failed", "issues_critical", "issues_warning",
        "issues_notice", "chunks_done",
    )

    def beat(self, **counters: int) -> None:
        """Heartbeat plus counter increments: the one way a crawl changes the progress counters.

        Increments are F() expressions, so chunks writing at once add up; only
        the names in COUNTERS are accepted.
        """
        unknown = set(counters) - set(self.COUNTERS)
        if unknown:
            raise ValueError(f"not a progress counter: {', '.join(sorted(unknown))}")
        changes = {name: F(name) + value for name, value in counters.items() if value}
        Audit.objects.filter(pk=self.pk).update(heartbeat_at=timezone.now(), **changes)

    def recount(self) -> None:
        """Set the counters exactly from the rows (a retried chunk's increments can double count)."""
        by_severity = dict(self.issues.values("severity").annotate(n=Count("id")).values_list("severity", "n"))
        pages = self.pages.filter(kind=Page.Kind.PAGE)
        crawled = pages.count()
        queued = FrontierURL.objects.filter(audit=self, kind=Page.Kind.PAGE, skip_reason="").count()
        Audit.objects.filter(pk=self.pk).update(
            pages_discovered=max(crawled, queued), pages_crawled=crawled,
            pages_failed=pages.exclude(fetch_error="").count(),
            issues_critical=by_severity.get("critical", 0), issues_warning=by_severity.get("warning", 0),
            issues_notice=by_severity.get("notice", 0),
        )

    def settings_copy(self) -> dict:
        """The limits of this audit, for re-running it as a fresh audit."""
        fields = [
            "start_url", "max_pages", "max_depth", "concurrency", "rate", "include_patterns",
            "exclude_patterns", "user_agent", "respect_robots", "check_external", "allow_private",
        ]
        return {name: getattr(self, name) for name in fields}


class Page(models.Model):
    """One URL the audit fetched: a page, an internal resource, or a checked external link."""

    class Kind(models.TextChoices):
        PAGE = "page", "Page"
        RESOURCE = "resource", "Resource"
        EXTERNAL = "external", "External link"

    # db_index=False here and on the other per-audit tables: every index of theirs
    # leads with audit, so the FK's own index only cost a write per row.
    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="pages", db_index=False)
    url_hash = models.CharField(max_length=32)
    url = models.TextField()
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PAGE)
    final_url = models.TextField(blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    redirect_chain = models.JSONField(default=list, blank=True)  # [[url, status, location], …]
    redirect_count = models.PositiveSmallIntegerField(default=0)
    content_type = models.CharField(max_length=100, blank=True)
    size_bytes = models.PositiveIntegerField(default=0)
    ttfb_ms = models.PositiveIntegerField(default=0)
    total_ms = models.PositiveIntegerField(default=0)
    depth = models.PositiveSmallIntegerField(default=0)
    title = models.CharField(max_length=1000, blank=True)
    description = models.TextField(blank=True)
    canonical = models.TextField(blank=True, help_text="Absolute, normalised canonical URL")
    canonical_hash = models.CharField(max_length=32, blank=True)
    h1_count = models.PositiveSmallIntegerField(default=0)
    word_count = models.PositiveIntegerField(default=0)
    robots = models.CharField(max_length=200, blank=True)
    indexable = models.BooleanField(default=False)
    in_sitemap = models.BooleanField(default=False)
    content_hash = models.CharField(max_length=32, blank=True)
    inlinks = models.PositiveIntegerField(default=0)
    outlinks = models.PositiveIntegerField(default=0)
    fetch_error = models.CharField(max_length=32, choices=FetchErrorCode.choices, blank=True)
    fetch_error_detail = models.CharField(max_length=500, blank=True)
    crawled_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["depth", "id"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "url_hash"], name="page_unique_url_per_audit"),
        ]
        indexes = [
            # Page table filters and the status-code chart.
            models.Index(fields=["audit", "kind", "status_code"], name="page_audit_kind_status"),
            # Depth filter, depth chart and the deep_page finalize check.
            models.Index(fields=["audit", "kind", "depth"], name="page_audit_kind_depth"),
            # Duplicate title / content finalize checks group by these. HTML pages
            # only: the resource and external rows (most of an audit's rows) have
            # neither, and each would cost two index entries for nothing.
            models.Index(fields=["audit", "title"], name="page_audit_title", condition=Q(kind="page")),
            models.Index(fields=["audit", "content_hash"], name="page_audit_content_hash", condition=Q(kind="page")),
        ]

    def __str__(self):
        return self.url

    def get_absolute_url(self):
        return reverse("page-detail", args=[self.audit_id, self.pk])

    @property
    def status_class(self) -> str:
        """The URL's own answer: a URL that redirected is 3xx whatever it ended at."""
        if self.redirect_count:
            return "3xx"
        if self.status_code is None:
            return "error"
        return f"{self.status_code // 100}xx"


class Issue(models.Model):
    class Review(models.TextChoices):
        OPEN = "open", "Open"
        REVIEWED = "reviewed", "Reviewed"
        IGNORED = "ignored", "Ignored"

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="issues", db_index=False)
    page = models.ForeignKey(Page, on_delete=models.CASCADE, null=True, blank=True, related_name="issues")
    url = models.TextField(help_text="The page the issue is on (the source page for link issues)")
    code = models.CharField(max_length=40, choices=IssueCode.choices)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    message = models.TextField()
    target_url = models.TextField(blank=True)
    key = models.CharField(max_length=32, help_text="Stable hash of what makes the issue unique")
    review = models.CharField(max_length=10, choices=Review.choices, default=Review.OPEN)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            # Re-inserting the same issue (a retried chunk, a re-run finalize) is harmless.
            models.UniqueConstraint(fields=["audit", "key"], name="issue_unique_key_per_audit"),
        ]
        indexes = [
            # Issue table filters and the summary by severity and code.
            models.Index(fields=["audit", "severity", "code"], name="issue_audit_severity_code"),
            models.Index(fields=["audit", "code"], name="issue_audit_code"),
        ]

    def __str__(self):
        return f"{self.code} on {self.url}"

    @property
    def issue_type(self):
        return CATALOGUE.get(self.code)


# --- lease tables: the crawl's scratch state -----------------------------------


class FrontierQuerySet(models.QuerySet):
    """Frontier rows, with the lease and Retry-After rules judged by the database clock."""

    def due(self):
        """Rows no Retry-After holds back (never rate limited, or their wait is over)."""
        return self.filter(Q(not_before__isnull=True) | Q(not_before__lte=Now()))

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
        it says. With ``page_depth_cap`` (a top-up) deeper pages stay pending;
        with ``url_limit``, up to that many URLs go, of which at most ``limit``
        pages. The UPDATE repeats ``state=pending``: of two chunks racing for a
        row, exactly one gets it.
        """
        pending = self.filter(audit_id=lease.audit_id, state=FrontierURL.State.PENDING).due()
        if page_depth_cap is not None:
            pending = pending.filter(~Q(kind=Page.Kind.PAGE) | Q(depth__lte=page_depth_cap))
        if budget <= 0:
            pending = pending.exclude(kind=Page.Kind.PAGE, reschedules=0)
        elif pending.filter(kind=Page.Kind.PAGE, linked=True).exists():
            # Pages reached through links go first, so a page both in the sitemap
            # and linked is crawled at its click depth; sitemap-only pages (orphan
            # candidates) wait until links have nothing more to give.
            pending = pending.exclude(kind=Page.Kind.PAGE, linked=False)
        rows = pending.order_by("depth", "id").values_list("id", "kind", "reschedules")
        ids, pages, counted = [], 0, 0
        for row_id, kind, reschedules in rows[:max(limit, url_limit or 0)]:
            if kind == Page.Kind.PAGE:
                pages += 1
                if pages > limit:  # a top-up's extra room is for checks
                    continue
                if not reschedules:
                    counted += 1
                    if counted > budget:
                        continue
            ids.append(row_id)
        self.filter(id__in=ids, state=FrontierURL.State.PENDING).update(
            state=FrontierURL.State.LEASED, chunk=lease.number)
        return ids

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


class LinkEdge(models.Model):
    """A link from a crawled page to a URL; one row per (source, target, tag).

    No unique key: a page's edges are written in the same fenced transaction
    as the page, after deleting whatever an earlier try wrote for that source
    (ChunkWriter._write_links), so a retry replaces them instead of adding.
    A unique index here cost a 32-character key and an index entry on each of
    the ~90 edges a page has.
    """

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="links", db_index=False)
    source_hash = models.CharField(max_length=32)
    source_url = models.TextField()
    target_hash = models.CharField(max_length=32)
    target_url = models.TextField()
    tag = models.CharField(max_length=10, default="a")
    anchor_text = models.CharField(max_length=200, blank=True)
    nofollow = models.BooleanField(default=False)
    internal = models.BooleanField(default=True)

    class Meta:
        # No index by target: edges arrive in crawl order with random target
        # hashes, so one would dirty a different leaf page for nearly every edge
        # on every commit (benchmarks/edge_index.py, SQLite, 910,000 edges in
        # commits of 4,550: 37.1 s with it, 6.0 s without, 8.3 s with Inlink's
        # sorted build at the end). Lookups by target go through Inlink.
        indexes = [
            # Outlinks of a page, and the delete before a page's edges are (re)written.
            models.Index(fields=["audit", "source_hash"], name="link_audit_source"),
            # The hreflang alternates alone, for finalize's two hreflang checks:
            # rare on most sites, they were a read of every edge of the audit
            # each (12 ms apiece at 1,000 pages), and the other edges add no entry.
            models.Index(fields=["audit", "source_hash"], name="link_hreflang", condition=Q(tag="hreflang")),
        ]

    def __str__(self):
        return f"{self.source_url} -> {self.target_url}"


class Inlink(models.Model):
    """The link edges of an audit by target: built once the audit has ended, sorted, in one statement.

    Kept apart from LinkEdge so the crawl never maintains an index by target
    (see LinkEdge.Meta). A sorted build fills the key in order: 2.3 s for
    910,000 edges on SQLite (benchmarks/edge_index.py). ``Audit.links_indexed`` says whether an audit's rows
    are here and current; until then (a running or resumed audit, or one whose
    build task has not run yet) lookups scan the audit's edges instead
    (``audits.inlinks``).
    """

    # The key is the lookup: inlinks of a URL (a page's "linked from" list). No
    # surrogate id: on PostgreSQL, building 956,280
    # edges took 6.9 s with an id (its sequence and index) beside the lookup
    # index, 3.8 s with the lookup index alone (measured with psql).
    pk = models.CompositePrimaryKey("audit", "target_hash", "tag", "edge_id")
    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="+", db_index=False)
    target_hash = models.CharField(max_length=32)
    tag = models.CharField(max_length=10)
    edge_id = models.BigIntegerField()  # the LinkEdge row

    def __str__(self):
        return f"{self.tag} edge {self.edge_id} -> {self.target_hash}"


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
        )
        return self.get(audit_id=audit_id, number=number) if updated else None


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
        """Extend the lease by ``seconds``, only while we still own it (the owner token).

        Every write of a chunk calls this first inside its transaction; False
        means the lease was reclaimed from us and nothing may be written.
        """
        return ChunkLease.objects.filter(pk=self.pk, token=self.token, state=self.State.LEASED).update(
            leased_until=Now() + timedelta(seconds=seconds)
        ) == 1

    def release(self, ids: list[int] | None = None) -> None:
        """Hand URLs this chunk holds (``ids``, or all) back to the frontier, if we still own it."""
        with transaction.atomic():
            if not ChunkLease.objects.filter(pk=self.pk, token=self.token).exists():
                return
            rows = FrontierURL.objects.held_by(self)
            if ids is not None:
                rows = rows.filter(id__in=ids)
            rows.update(state=FrontierURL.State.PENDING, chunk=None)

    def finish(self, unfinished: list[int] = ()) -> bool:
        """Mark the chunk done and release the URLs it did not start; False if we no longer own it."""
        with transaction.atomic():
            done = ChunkLease.objects.filter(pk=self.pk, token=self.token, state=self.State.LEASED).update(
                state=self.State.DONE, finished_at=Now())
            if not done:
                return False
            if unfinished:
                FrontierURL.objects.held_by(self).filter(id__in=unfinished).update(
                    state=FrontierURL.State.PENDING, chunk=None)
        self.state = self.State.DONE
        return True

    def abandon(self) -> bool:
        """Give up a chunk whose lease expired with its attempts spent; False if someone else did."""
        return ChunkLease.objects.filter(pk=self.pk, state=self.State.LEASED, leased_until__lt=Now()).update(
            state=self.State.ABANDONED, token=None, finished_at=Now()) == 1

    def expired(self) -> bool:
        """Whether the lease has run out, by the database clock."""
        return ChunkLease.objects.filter(pk=self.pk, leased_until__lt=Now()).exists()

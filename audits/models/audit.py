"""An audit: what was asked, how far it got, and how it ended.

State changes are methods built on conditional UPDATEs (``WHERE status IN …``), so
two processes racing to make the same transition change the row once; the loser
sees ``False`` and does nothing.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Case, Count, F, Min, Q, Value, When
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from crawler.checks import CheckSettings
from crawler.reading import reading
from crawler.types import Severity as CrawlSeverity

from ..thresholds import described, judged, overrides_of, settings_of

# How an audit treats JavaScript (crawler.render_rules): read the HTML only,
# render every page, or render the pages whose HTML looks like an app shell.
RENDER_CHOICES = [("none", "HTML only"), ("all", "Render every page"), ("auto", "Render app shells")]


def not_stamped_since(field: str, read) -> Q:
    """``field`` still holds the time we read: no one stamped it since (stamps only move forward)."""
    # "No newer than read", not "equal": SQLite keeps Now() as text to the millisecond
    # ('...:20.000'), which the same instant sent back from Python ('...:20') does not equal.
    if read is None:
        return Q(**{f"{field}__isnull": True})
    return Q(**{f"{field}__lt": read + timedelta(microseconds=1)})


class Severity(models.TextChoices):
    CRITICAL = CrawlSeverity.CRITICAL.value, "Critical"
    WARNING = CrawlSeverity.WARNING.value, "Warning"
    NOTICE = CrawlSeverity.NOTICE.value, "Notice"


# The order the issue tables list severities in, critical first: Issue.severity_rank keeps it
# on every issue row; a list of rows without that column (GoneIssue) annotates it.
SEVERITY_RANK = Case(
    When(severity=Severity.CRITICAL, then=Value(0)),
    When(severity=Severity.WARNING, then=Value(1)),
    default=Value(2), output_field=models.SmallIntegerField(),
)
SEVERITY_RANKS = {Severity.CRITICAL.value: 0, Severity.WARNING.value: 1, Severity.NOTICE.value: 2}


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
        START_BLOCKED_BY_ROBOTS = "start_blocked_by_robots", "robots.txt disallows the start URL"
        SITE_UNAVAILABLE = "site_unavailable", "The start page never answered successfully"
        LOGIN_FAILED = "login_failed", "Logging in to the site failed, or its session kept expiring"
        WORKER_LOST = "worker_lost", "The worker crawling it died repeatedly"
        STALLED = "stalled", "No progress for too long"
        START_FAILED = "start_failed", "The start step never finished (its worker died or timed out each time)"
        FINALIZE_FAILED = "finalize_failed", "The cross-page checks never finished (their worker died or timed out each time)"
        DB_UNAVAILABLE = "database_unavailable", "The database was unavailable"
        STORAGE_FULL = "storage_full", "The database or disk is full"
        TIMEOUT = "timeout", "A task ran past its time limit"
        CANCELLED = "cancelled", "Cancelled by a person"
        INTERNAL_ERROR = "internal_error", "Internal error"
        UNKNOWN = "unknown", "Unknown failure"

    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.FINALIZING)
    ENDED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    class Trigger(models.TextChoices):
        MANUAL = "manual", "Started by a person"
        SCHEDULE = "schedule", "Started by the site's schedule"
        COMMAND = "command", "Started from the command line"

    class Mode(models.TextChoices):
        FULL = "full", "Full crawl"
        VALIDATE = "validate", "Re-check an earlier audit's issues"
        DELTA = "delta", "Full crawl reusing unchanged pages"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="audits")
    site = models.ForeignKey("audits.Site", on_delete=models.CASCADE, related_name="audits")
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    # The audit this one is compared with: the site's previous completed audit,
    # chosen at finalize unless given beforehand (the command's --compare-to).
    baseline = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # Counts of what changed since the baseline, written at finalize (audits.diff);
    # null until then, or when there was nothing to compare with.
    change_counts = models.JSONField(null=True, blank=True)
    # The health score, 0 to 100 (audits.score), written at finalize and again
    # whenever triage ignores or reopens issues; null until the audit completes.
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    # A validation re-fetches only what carried ``source``'s issues and judges each
    # one (audits.validation); a delta crawl asks the site whether each of
    # ``source``'s pages changed and reuses the unchanged ones (audits.crawl.reuse).
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.FULL)
    source = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                               help_text="The earlier audit a validation re-checks or a delta crawl reuses")
    start_url = models.CharField(max_length=2048)
    origin = models.CharField(max_length=300, blank=True, help_text="Scheme and host after the start URL's redirects")
    # Who the site saw crawling (SiteAccess.identity; empty: anyone): a delta
    # crawl reuses only an audit crawled as the same, whose pages it would see.
    access_identity = models.CharField(max_length=64, blank=True)
    # How the crawl read pages (crawler.reading): a delta crawl reuses only pages read the same way.
    reading = models.CharField(max_length=16, blank=True)

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
    render = models.CharField(max_length=5, choices=RENDER_CHOICES, default="none",
                              help_text="Render pages in headless Chromium: none, all, or auto (app shells)")
    thresholds = models.JSONField(default=dict, blank=True,
                                  help_text="Check thresholds that differ from the defaults (audits.thresholds)")
    # Every threshold the checks judge by, defaults included, kept as the crawl begins (audits.thresholds.judged):
    # a default an upgrade changes since changes neither what this audit judged by nor what a validation of it does.
    judged_by = models.JSONField(null=True, blank=True, editable=False)

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
    # When the site's last Retry-After pause ends, on the database clock (``pause_site``): every chunk,
    # on any worker, starts nothing on the site before then, not only the one the site answered.
    site_paused_until = models.DateTimeField(null=True, blank=True, editable=False)
    chunks_done = models.PositiveIntegerField(default=0)
    # Set when a chunk was scheduled while another ran: pages were then written
    # out of click order, and finalize settles their depths (audits.depths).
    out_of_order = models.BooleanField(default=False)
    # Tries of the start and finalize steps, counted as each begins (chunks count
    # theirs on ChunkLease): a step that kills its worker every time ends the audit.
    start_attempts = models.PositiveSmallIntegerField(default=0)
    finalize_attempts = models.PositiveSmallIntegerField(default=0)

    # What start learnt, kept so every chunk (in any process) makes the same decisions.
    # The body-text hash of the page the site answered a URL that cannot exist
    # with (crawler.soft404): empty when it answered 404, as it should.
    not_found_hash = models.CharField(max_length=32, blank=True)
    robots_status = models.CharField(max_length=16, blank=True)
    robots_http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    robots_body = models.TextField(blank=True)
    # When robots.txt was read: a chunk reads it again once it is a day old (audits.crawl.robots_refresh).
    robots_fetched_at = models.DateTimeField(null=True, blank=True)
    sitemap_found = models.BooleanField(null=True)
    # Why the start's probe of the http:// form gave no verdict (no answer, out of time, a 5xx or a status that
    # refuses crawlers, no http:// form to probe); empty when it gave one.
    # An earlier audit's http_not_redirected is then unknown, not fixed (audits.diff).
    http_unsure = models.CharField(max_length=300, blank=True)
    # Whether the audit's link edges are in Inlink (built after the audit ends; a resume clears it).
    links_indexed = models.BooleanField(default=False)
    # Being deleted (audits.purge), its rows going in batches: nothing may start from it meanwhile.
    deleting = models.BooleanField(default=False, editable=False)

    created_at = models.DateTimeField(auto_now_add=True)
    # The network a person's request to start it came from (config.client_ip; an IPv6
    # address by its /64, config.client_ip.network_of): the per-address hourly limit counts these
    # across people. Empty for schedules and the command.
    created_from = models.GenericIPAddressField("started from", null=True, blank=True, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # A resumed audit's clock: the seconds its earlier runs took, and when this run began.
    # Its time stopped in between (a weekend after a cancel) is no time it spent crawling.
    earlier_run_seconds = models.FloatField(default=0.0, editable=False)
    resumed_at = models.DateTimeField(null=True, blank=True, editable=False)

    # Failure columns: filled on every failure path, including the ones only the watchdog sees.
    error_code = models.CharField(max_length=32, choices=ErrorCode.choices, blank=True)
    error_detail = models.TextField(blank=True)
    failed_phase = models.CharField(max_length=16, choices=Phase.choices, blank=True)
    # Set by finish() on a scheduled run that completes after failed scheduled runs a failure alert told of:
    # when the first of them failed. Its alert tells the site recovered (audits.notify).
    failing_since = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The audit list: a person's audits, newest first.
            models.Index(fields=["owner", "-created_at"], name="audit_owner_created"),
            # The watchdog and the running-audit quota scan active audits.
            models.Index(fields=["status", "heartbeat_at"], name="audit_status_heartbeat"),
            # A site's history, newest first, and its previous completed audit.
            models.Index(fields=["site", "status", "-id"], name="audit_site_status"),
            # The per-address hourly limit: audits started from one address, newest first.
            models.Index(fields=["created_from", "-created_at"], name="audit_address_created"),
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
    def stopped_before_cross_page_checks(self) -> bool:
        """Ended without finalize's cross-page checks (broken links, canonicals, duplicates…) having run to the end.

        Only ``finish`` completes an audit, after every check ran; a failed or
        cancelled one stopped before them or while they ran, so an empty list of
        their issues says nothing.
        """
        return self.status in (self.Status.FAILED, self.Status.CANCELLED)

    def running_now(self) -> bool:
        """Whether the stored row is running now (another process may have failed or cancelled it)."""
        return type(self).objects.filter(pk=self.pk, status=self.Status.RUNNING).exists()

    @property
    def issues_total(self) -> int:
        return self.issues_critical + self.issues_warning + self.issues_notice

    def patterns(self, which: str) -> list[str]:
        text = self.include_patterns if which == "include" else self.exclude_patterns
        return [line.strip() for line in text.splitlines() if line.strip()]

    # --- state transitions -------------------------------------------------

    def _transition(self, allowed_from, condition: Q | None = None, **changes) -> bool:
        """Apply ``changes`` only if the row is still in one of ``allowed_from`` (and meets ``condition``).

        The WHERE clause is the guard: of two processes racing, exactly one
        UPDATE matches. The instance is refreshed so callers see the outcome.
        """
        updated = Audit.objects.filter(condition or Q(), pk=self.pk, status__in=list(allowed_from)).update(**changes)
        self.refresh_from_db()
        return updated == 1

    # Heartbeats take the database clock (Now()), as leases do: a watchdog on another
    # machine compares them with that clock. started_at and finished_at, which screens show, keep this machine's.
    def start(self) -> bool:
        return self._transition(
            [self.Status.QUEUED], status=self.Status.RUNNING, phase=self.Phase.STARTING,
            started_at=timezone.now(), heartbeat_at=Now(),
        )

    def begin_crawl(self, origin: str, access_identity: str = "", not_found_hash: str = "", *,
                    http_unsure: str = "") -> bool:
        return self._transition(
            [self.Status.RUNNING], phase=self.Phase.CRAWLING, origin=origin, access_identity=access_identity,
            not_found_hash=not_found_hash, http_unsure=http_unsure[:300], reading=reading(),
            judged_by=judged(self.check_settings()), heartbeat_at=Now(),
        )

    def resume_crawl(self) -> bool:
        """Queued again after a failure or cancel: crawl on from the frontier."""
        return self._transition(
            [self.Status.QUEUED], status=self.Status.RUNNING, phase=self.Phase.CRAWLING,
            heartbeat_at=Now(), resumed_at=timezone.now(),
        )

    def run_seconds(self, now=None) -> float:
        """Seconds spent running, over every run of a resumed audit: not the time it stood stopped."""
        began = self.resumed_at or self.started_at
        if began is None:
            return self.earlier_run_seconds
        end = self.finished_at or now or timezone.now()
        return self.earlier_run_seconds + max((end - began).total_seconds(), 0.0)

    def begin_finalize(self) -> bool:
        return self._transition(
            [self.Status.RUNNING], status=self.Status.FINALIZING, phase=self.Phase.FINALIZING,
            heartbeat_at=Now(),
        )

    def finish(self) -> bool:
        return self._transition(
            [self.Status.FINALIZING], status=self.Status.COMPLETED, phase=self.Phase.DONE,
            finished_at=timezone.now(), current_window=0, failing_since=self._told_failing_since(),
        )

    def _told_failing_since(self):
        """When the failing this scheduled run ends began, if a failure alert told of it; else None.

        Decided once, as the run completes: were it read from the earlier alerts' rows at each send,
        a recovery alert waiting to be sent again would stop being due when one of them is given up.
        """
        from .notification import Notification  # notification -> this module

        failures = self.failures_before()
        told = failures.filter(notifications__event=Notification.Event.FAILED,
                               notifications__state__in=Notification.TOLD)
        if self.trigger != self.Trigger.SCHEDULE or not told.exists():
            return None
        return failures.aggregate(first=Min("finished_at"))["first"]

    def fail(self, code: str, detail: str = "", phase: str | None = None, *, quiet: bool = False) -> bool:
        """Mark the audit failed with a code from ErrorCode; keeps everything crawled so far.

        ``quiet``: only if nobody beat since this row was read (the watchdog's
        "stalled": a chunk's beat in between wins).
        """
        code = code if code in self.ErrorCode.values else self.ErrorCode.UNKNOWN
        current = Audit.objects.filter(pk=self.pk).values_list("phase", flat=True).first()
        return self._transition(
            self.ACTIVE, not_stamped_since("heartbeat_at", self.heartbeat_at) if quiet else None,
            status=self.Status.FAILED, error_code=code, error_detail=detail[:4000],
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
        """A failed or cancelled audit goes back to the queue, keeping its frontier and results.

        Its login session starts afresh: the run being resumed may have spent its
        logins (that is often why it failed), and its cookies may be sealed under
        a key that has changed since.
        """
        from .site_access import AuditSession  # site_access -> site -> this module

        self.refresh_from_db(fields=["started_at", "resumed_at", "finished_at", "earlier_run_seconds"])
        reopened = self._transition(
            [self.Status.FAILED, self.Status.CANCELLED], Q(finished_at=self.finished_at), status=self.Status.QUEUED,
            phase=self.Phase.QUEUED, error_code="", error_detail="", failed_phase="",
            finished_at=None, heartbeat_at=Now(), links_indexed=False, start_attempts=0, finalize_attempts=0,
            # From the reopen: waiting for a worker counts as this run's, as it does not the stopped days before.
            earlier_run_seconds=self.run_seconds(), resumed_at=timezone.now(),
        )
        if reopened:
            AuditSession.objects.filter(audit=self).update(logins=0, cookies="")
        return reopened

    STEP_ATTEMPTS = {"start": "start_attempts", "finalize": "finalize_attempts"}

    def count_attempt(self, step: str) -> int:
        """Count one more try of ``step`` ("start" or "finalize") and return how many there have been."""
        field = self.STEP_ATTEMPTS[step]
        Audit.objects.filter(pk=self.pk).update(**{field: F(field) + 1})
        value = Audit.objects.filter(pk=self.pk).values_list(field, flat=True).first() or 0
        setattr(self, field, value)
        return value

    def fail_step(self, step: str, tries: int) -> bool:
        """Fail the audit because ``step`` never finished in ``tries`` tries; what was crawled stays."""
        code, phase = ((self.ErrorCode.START_FAILED, self.Phase.STARTING) if step == "start"
                       else (self.ErrorCode.FINALIZE_FAILED, self.Phase.FINALIZING))
        return self.fail(code, f"The {step} step was tried {tries} times and never finished: its worker "
                               "died or ran past the task time limit each time.", phase)

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
        Audit.objects.filter(pk=self.pk).update(heartbeat_at=Now(), **changes)

    def record_robots(self, status: str, http_status: int | None, body: str, sitemap_found: bool | None) -> None:
        """What the start step (or a chunk, a day later) learnt of robots.txt and the sitemaps, for every
        chunk to decide alike."""
        self._store(robots_status=status, robots_http_status=http_status, robots_body=body,
                    sitemap_found=sitemap_found, robots_fetched_at=timezone.now())

    def keep_window(self, window: int) -> None:
        """The concurrency a chunk ended at: where the next chunk's window starts."""
        self._store(current_window=window)

    def pause_site(self, seconds: float) -> None:
        """The site asked to be left alone for ``seconds`` (a 429 or 503 with Retry-After): store when that ends.

        Only ever later: a shorter wait one chunk is given does not end the longer one another was.
        """
        until = Now() + timedelta(seconds=seconds)
        Audit.objects.filter(Q(site_paused_until__isnull=True) | Q(site_paused_until__lt=until),
                             pk=self.pk).update(site_paused_until=until)

    def site_pause_left(self) -> float:
        """Seconds until the site's stored pause ends by the database clock; 0 when none runs."""
        until, now = Audit.objects.filter(pk=self.pk).annotate(db_now=Now()).values_list(
            "site_paused_until", "db_now").first() or (None, None)
        return max(0.0, (until - now).total_seconds()) if until is not None else 0.0

    def mark_out_of_order(self) -> None:
        """Chunks run side by side from now on, so finalize settles the pages' depths (audits.depths)."""
        if not self.out_of_order:
            self._store(out_of_order=True)

    def mark_links_indexed(self) -> None:
        """Nothing left for the link index to build (the audit is being deleted): the watchdog skips it."""
        self._store(links_indexed=True)

    def compare_with(self, baseline: Audit) -> None:
        """Pin the audit finalize's diff compares this one with (audits.diff.baseline_for reads it)."""
        self._store(baseline=baseline)

    def set_baseline(self, baseline: Audit | None, counts: dict | None) -> None:
        """The audit this one is compared with, and the counts of what changed since (audits.diff)."""
        self._store(baseline=baseline, change_counts=counts)

    def _store(self, **changes) -> None:
        """Write ``changes`` to this audit's row alone (no save(): other fields may be changing) and to self."""
        Audit.objects.filter(pk=self.pk).update(**changes)
        for name, value in changes.items():
            setattr(self, name, value)

    def claim_for_watchdog(self) -> bool:
        """Stamp the heartbeat only if nobody did since this row was read: of two watchdogs, one acts."""
        return Audit.objects.filter(not_stamped_since("heartbeat_at", self.heartbeat_at), pk=self.pk,
                                    status=self.status).update(heartbeat_at=Now()) == 1

    def recount(self) -> None:
        """Set the counters exactly from the rows (a retried chunk's increments can double count)."""
        page = self.pages.model.Kind.PAGE  # Page lives in results.py, which imports this module
        pages = self.pages.filter(kind=page)
        crawled = pages.count()
        queued = self.frontier.filter(kind=page, skip_reason="").count()
        self._store(pages_discovered=max(crawled, queued), pages_crawled=crawled,
                    pages_failed=pages.exclude(fetch_error="").count(), **self._issue_counts())

    def _issue_counts(self) -> dict[str, int]:
        """issues_critical, issues_warning and issues_notice from the rows, leaving out what a person ignored."""
        ignored = self.issues.model.Review.IGNORED
        by_severity = dict(self.issues.exclude(review=ignored).values_list("severity")
                           .annotate(n=Count("id")).order_by())
        return {f"issues_{severity}": by_severity.get(severity, 0) for severity in Severity.values}

    def rescore(self, *, recount_changes: bool = True) -> None:
        """Issue counters without ignored issues, and the health score (audits.score).

        Run at finalize after ``recount``, after every triage change, and once
        a failed or cancelled audit's issues take their marks (audits.inlinks.build), so the
        audit list, the site's trend and the alerts leave out what a person
        ignored. The score is written only for an audit whose crawl is over and
        complete (finalizing or completed): a partial crawl's would mislead.
        On a running audit a chunk's increment landing between the count and
        the write is lost; finalize counts again, exactly, before it completes.
        """
        # Imported here: audits.score and audits.diff read pages and issues, whose module imports this one.
        from audits.diff import stored_counts
        from audits.score import compute

        # A validation's pages are the few it re-checked, not the site: no score.
        finished = self.status in (self.Status.FINALIZING, self.Status.COMPLETED) and self.mode != self.Mode.VALIDATE
        changes = self._issue_counts()
        changes["score"] = compute(self) if finished else None
        if recount_changes and self.change_counts is not None:
            # What changed since the baseline leaves out what is ignored, as the lists it links to do.
            # Finalize passes False: audits.diff.record has just counted them.
            changes["change_counts"] = stored_counts(self)
        self._store(**changes)

    def adopt_validation_marks(self) -> int:
        """Mark this audit's open issues as a person marked them on a validation of it (ignored, else
        reviewed); how many changed. The caller rescores (``rescore``) when any did.

        Matched as the validation's checklist matches them: a link whose anchor text changed is the same
        link there (``audits.diff.marked_on_validations``).
        """
        from ..diff import marked_on_validations  # which imports this module

        Review = self.issues.model.Review
        changed = 0
        for review in (Review.IGNORED, Review.REVIEWED):
            changed += self.issues.filter(review=Review.OPEN).filter(
                marked_on_validations(self.pk, review=review)).update(review=review)
        return changed

    def set_review(self, issues, review: str) -> int:
        """Mark ``issues`` (a queryset; only this audit's count) reviewed, ignored or open; returns how many changed.

        One UPDATE however many are chosen; the totals and the score follow. The
        same issues take the mark on every later audit of the site too, and, marked
        on a validation, on the audit it re-checked and that audit's other
        validations: the next audit takes each issue's mark from the newest audit
        holding it (``audits.diff``), so the newest must hold the person's latest word.
        """
        from ..diff import link_echoes  # which imports this module

        Issue = self.issues.model
        chosen = issues.filter(audit=self).exclude(review=review)
        first = self.source_id if self.mode == self.Mode.VALIDATE and self.source_id else self.pk
        by_key = Issue.objects.filter(audit__site_id=self.site_id, audit_id__gte=first, audit__deleting=False,
                                      key__in=chosen.values("key"))
        # And a link whose anchor text changed between the audit and its validation, as the checklist matches it.
        # A statement of its own: OR-ed with the key match, no index serves either and every issue row is read.
        by_link = Issue.objects.filter(pk__in=link_echoes(self, chosen).values("pk"))
        echoes = [found.exclude(audit=self).exclude(review=review) for found in (by_key, by_link)]
        touched = {audit_id for found in echoes for audit_id in found.values_list("audit_id", flat=True).distinct().order_by()}
        # Reopened by a person, an issue stays open under the site's ignore rules (IgnoreRule.apply_to).
        mark = {"review": review, "reopened": review == Issue.Review.OPEN}
        if touched:
            for found in echoes:
                found.update(**mark)
            for other in type(self).objects.filter(pk__in=touched):
                other.rescore()
        changed = chosen.update(**mark)
        if changed:
            self.rescore()
        return changed

    def settings_copy(self) -> dict:
        """The limits of this audit, for re-running it as a fresh audit."""
        fields = [
            "start_url", "max_pages", "max_depth", "concurrency", "rate", "include_patterns",
            "exclude_patterns", "user_agent", "respect_robots", "check_external", "allow_private", "render",
            "thresholds",
        ]
        return {name: getattr(self, name) for name in fields}

    def check_settings(self) -> CheckSettings:
        """The thresholds this audit's checks judge by: those it kept as its crawl began, else the defaults and
        what it changed."""
        return settings_of(self.thresholds, self.judged_by)

    def thresholds_described(self) -> list[str]:
        """Those that differ from today's defaults: what it changed, or a default it judged by before an upgrade."""
        return described(overrides_of(self.judged_by) if self.judged_by else self.thresholds)

    @classmethod
    def comparable(cls):
        """Audits a later one may compare with or start from: completed whole crawls.

        Not a validation, which re-checked a few URLs (compared with it, every other
        page would look new), nor one being deleted, whose issues go first.
        """
        return cls.objects.filter(status=cls.Status.COMPLETED, deleting=False).exclude(mode=cls.Mode.VALIDATE)

    def previous_completed(self) -> Audit | None:
        """The site's last completed audit created before this one: what "since last time" means."""
        return Audit.comparable().filter(site_id=self.site_id, pk__lt=self.pk).order_by("-pk").first()

    def failures_before(self):
        """The site's scheduled runs before this one that failed after its last completed scheduled run.

        The failing this run goes on with, or ends (audits.notify). Runs a person started, and cancelled
        ones, say nothing of whether the site works, so they neither count nor break the run of failures.
        """
        scheduled = Audit.objects.filter(site_id=self.site_id, trigger=self.Trigger.SCHEDULE, deleting=False,
                                         pk__lt=self.pk)
        last_completed = scheduled.filter(status=self.Status.COMPLETED).order_by("-pk").values_list(
            "pk", flat=True).first()
        return scheduled.filter(status=self.Status.FAILED, pk__gt=last_completed or 0)

"""A site: one owner's start URL, the crawl settings it runs with, its schedule and its alerts.

Every audit belongs to a site, so audits of the same site form a history that
can be compared run to run. The schedule itself is django-q2's own ``Schedule``
row (``audits.schedules`` keeps it in step with the site); the site holds what
a person chose.
"""

from __future__ import annotations

import re
import secrets
import zoneinfo
from datetime import datetime

from croniter import croniter
from django.conf import settings
from django.core.validators import URLValidator
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.functional import SimpleLazyObject

from ..thresholds import described
from .audit import RENDER_CHOICES, Severity

# The crawl settings a site saves and every audit of it copies: the new-audit form's fields.
CRAWL_SETTINGS = (
    "max_pages", "max_depth", "concurrency", "rate", "include_patterns", "exclude_patterns",
    "user_agent", "respect_robots", "check_external", "allow_private", "render", "thresholds",
)


class WebhookURLValidator(URLValidator):
    """Django's URL check, admitting a single-label host too: a service name such as ``alertmanager``.

    Whether such a host may be posted to is the deployment's choice (the form and
    the webhook's address guard); the stored URL only has to be well formed.
    """

    host_re = "(" + URLValidator.hostname_re + URLValidator.domain_re + URLValidator.tld_re \
        + "|" + URLValidator.hostname_re + ")"
    # Compiled on first use, as Django compiles its own: building it costs about
    # 50 ms, which every process would pay at import, the audit command included.
    regex = SimpleLazyObject(
        lambda: re.compile(URLValidator.regex.pattern.replace(URLValidator.host_re, WebhookURLValidator.host_re),
                           re.IGNORECASE))


def time_zone_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(zoneinfo.available_timezones())]


class SiteQuerySet(models.QuerySet):
    def scheduled(self):
        """Sites whose schedule should be live: a cadence chosen, not paused, not being deleted."""
        return self.exclude(cadence=Site.Cadence.NONE).filter(paused=False, deleting=False)

    def for_start_url(self, owner, start_url: str, *, keep: bool = False, **crawl_settings) -> Site:
        """The owner's site for ``start_url`` (already normalised), created if new.

        The settings given become the site's saved settings: the last audit a
        person asked for is how they want the site crawled from now on. ``keep``:
        an existing site keeps its own (a command-line run's limits are that run's).
        """
        site, created = self.get_or_create(owner=owner, start_url=start_url, defaults=crawl_settings)
        if not created and crawl_settings and not keep:
            changed = [name for name, value in crawl_settings.items() if getattr(site, name) != value]
            for name in changed:
                setattr(site, name, crawl_settings[name])
            if changed:
                site.save(update_fields=changed)
        return site


class Site(models.Model):
    class Cadence(models.TextChoices):
        NONE = "", "Not scheduled"
        HOURLY = "hourly", "Every hour"
        DAILY = "daily", "Every day"
        WEEKLY = "weekly", "Every week"
        CRON = "cron", "Cron expression"

    class Weekday(models.IntegerChoices):
        # Cron's numbering (0 is Sunday), so a weekday goes into an expression as it is.
        SUNDAY = 0, "Sunday"
        MONDAY = 1, "Monday"
        TUESDAY = 2, "Tuesday"
        WEDNESDAY = 3, "Wednesday"
        THURSDAY = 4, "Thursday"
        FRIDAY = 5, "Friday"
        SATURDAY = 6, "Saturday"

    # The fields that set the schedule's run times: saving a change to one sets the schedule anew
    # (audits.schedules.sync); saving only the others (alerts, crawl settings) leaves its next run as it is.
    RUN_TIME_FIELDS = frozenset({"cadence", "minute", "hour", "weekday", "cron", "time_zone", "paused"})

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sites")
    start_url = models.CharField(max_length=2048, help_text="Normalised; one site per owner and start URL")

    # The saved crawl settings (see CRAWL_SETTINGS); the defaults are the form's.
    max_pages = models.PositiveIntegerField(default=500)
    max_depth = models.PositiveSmallIntegerField(default=10)
    concurrency = models.PositiveSmallIntegerField(default=8)
    rate = models.FloatField(null=True, blank=True, help_text="Requests per second; empty for no limit")
    include_patterns = models.TextField(blank=True)
    exclude_patterns = models.TextField(blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    respect_robots = models.BooleanField(default=True)
    check_external = models.BooleanField(default=True)
    allow_private = models.BooleanField(default=False)
    render = models.CharField(max_length=5, choices=RENDER_CHOICES, default="none")
    thresholds = models.JSONField(default=dict, blank=True,
                                  help_text="Check thresholds that differ from the defaults (audits.thresholds)")

    # The schedule, in the owner's time zone. Hourly runs at `minute`; daily at
    # `hour`:`minute`; weekly on `weekday` at that time; cron by `cron`.
    cadence = models.CharField(max_length=8, choices=Cadence.choices, default=Cadence.NONE, blank=True)
    minute = models.PositiveSmallIntegerField(default=0)
    hour = models.PositiveSmallIntegerField(default=3)
    weekday = models.PositiveSmallIntegerField(choices=Weekday.choices, default=Weekday.MONDAY)
    cron = models.CharField(max_length=100, blank=True, help_text="Five fields: minute hour day month weekday")
    time_zone = models.CharField(max_length=64, default=settings.TIME_ZONE)
    paused = models.BooleanField(default=False)
    # A scheduled run can be a delta crawl of the site's last completed audit: a
    # whole audit that parses only the pages the server says changed.
    scheduled_mode = models.CharField(
        max_length=10, choices=[("full", "Full crawl"), ("delta", "Re-crawl changes (reuse unchanged pages)")],
        default="full", help_text="A delta run asks the site which pages changed since the last completed "
                                  "audit and reuses the others without parsing them; the result is a whole audit.")

    # Alerts for scheduled audits: new issues at or above this severity, or a failure.
    notify_severity = models.CharField(max_length=10, choices=Severity.choices, blank=True,
                                       default=Severity.CRITICAL,
                                       help_text="Alert on new issues at or above this; empty for none")
    notify_on_failure = models.BooleanField(default=True)
    notify_email = models.BooleanField(default=True, help_text="E-mail the owner")
    webhook_url = models.CharField(max_length=2048, blank=True, validators=[WebhookURLValidator()],
                                   help_text="POST a JSON summary here")
    # Random, and no secret without SECRET_KEY: a new value gives the webhook a new signing key (webhook_secret).
    webhook_key_round = models.CharField(max_length=32, blank=True, editable=False)
    # django-q2 may deliver a fire twice: a fire at or before this run time is one
    # already handled (started or skipped) and starts nothing (audits.schedules.run_due).
    last_due_at = models.DateTimeField(null=True, blank=True, editable=False,
                                       help_text="The run time of the latest fire of the schedule handled")
    # Run times before this were another schedule's, or a paused one's: none of them counts as missed.
    schedule_set_at = models.DateTimeField(null=True, blank=True, editable=False,
                                           help_text="When the schedule was last set, changed or resumed")
    # When the schedule last went live (set, or resumed): a scheduled run before it is an earlier
    # series', not the baseline of this one's first run (audits.diff.baseline_for). A new hour is the same series.
    scheduled_since = models.DateTimeField(null=True, blank=True, editable=False)

    created_at = models.DateTimeField(auto_now_add=True)
    deleting = models.BooleanField(default=False, editable=False,
                                   help_text="Taken off every screen; a worker deletes it and its audits")

    objects = SiteQuerySet.as_manager()

    class Meta:
        ordering = ["start_url", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "start_url"], name="site_unique_start_url_per_owner"),
            models.CheckConstraint(condition=Q(minute__lte=59) & Q(hour__lte=23) & Q(weekday__lte=6),
                                   name="site_schedule_time_valid"),
        ]

    def __str__(self):
        return self.start_url

    def get_absolute_url(self):
        return reverse("site-detail", args=[self.pk])

    @property
    def schedule_name(self) -> str:
        """The django-q2 Schedule row's name: how the site finds its schedule (no FK to another app's row)."""
        return f"site-{self.pk}"

    @property
    def is_scheduled(self) -> bool:
        return self.cadence != self.Cadence.NONE and not self.paused and not self.deleting

    def crawl_settings(self) -> dict:
        return {name: getattr(self, name) for name in CRAWL_SETTINGS}

    def thresholds_described(self) -> list[str]:
        return described(self.thresholds)

    def webhook_secret(self) -> str:
        """The key the site's webhook POSTs are signed with (``crawler.webhook``): derived from SECRET_KEY,
        the site and its ``webhook_key_round``, so no key is stored, and a new round gives a new one."""
        seed = f"{self.pk}:{self.webhook_key_round}" if self.webhook_key_round else str(self.pk)
        return salted_hmac("siteward.webhook", seed, algorithm="sha256").hexdigest()[:40]

    def renew_webhook_key(self) -> None:
        """A new signing key: after a leak, or for a new receiver, which must not be able to forge the old one's."""
        self.webhook_key_round = secrets.token_hex(16)
        self.save(update_fields=["webhook_key_round"])

    def cron_expression(self) -> str:
        """The schedule as a five-field cron expression, read in the site's time zone."""
        if self.cadence == self.Cadence.HOURLY:
            return f"{self.minute} * * * *"
        if self.cadence == self.Cadence.DAILY:
            return f"{self.minute} {self.hour} * * *"
        if self.cadence == self.Cadence.WEEKLY:
            return f"{self.minute} {self.hour} * * {self.weekday}"
        return self.cron.strip()

    def zone(self) -> zoneinfo.ZoneInfo:
        try:
            return zoneinfo.ZoneInfo(self.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return zoneinfo.ZoneInfo(settings.TIME_ZONE)

    def next_run_after(self, moment: datetime | None = None) -> datetime:
        """The first run strictly after ``moment`` (default now), in the site's time zone."""
        start = (moment or timezone.now()).astimezone(self.zone())
        return croniter(self.cron_expression(), start).get_next(datetime)

    def is_run_time(self, moment: datetime) -> bool:
        """Whether ``moment`` is one of this schedule's run times (to the minute), in the site's zone."""
        return croniter.match(self.cron_expression(), moment.astimezone(self.zone()))

    def pause(self) -> None:
        Site.objects.filter(pk=self.pk).update(paused=True)
        self.paused = True

    def resume(self) -> None:
        Site.objects.filter(pk=self.pk).update(paused=False)
        self.paused = False

    def drop_held_runs(self) -> int:
        """Settle the runs the owner's limit held back, as not started: once the schedule is paused or unset,
        none of them may start later, on a resume weeks on, at a time that is no run time."""
        when = timezone.now().astimezone(self.zone()).strftime("%Y-%m-%d %H:%M %Z")
        return self.skipped_runs.filter(reason=SkippedRun.Reason.QUOTA).update(
            reason=SkippedRun.Reason.DROPPED, detail=f"Not started: the schedule was paused or unset at {when}.")


class SkippedRunQuerySet(models.QuerySet):
    def waiting(self):
        """Runs held back by the owner's running-audit limit that may still start: their site's latest run time."""
        return self.filter(reason=SkippedRun.Reason.QUOTA, site__last_due_at=F("due_at"))


class SkippedRun(models.Model):
    """A scheduled run that did not start an audit, and why: a person can see every one."""

    class Reason(models.TextChoices):
        STILL_RUNNING = "still_running", "The previous audit was still queued or running"
        QUOTA = "quota", "The owner already had as many audits running as allowed"
        PRIVATE_REFUSED = "private_refused", "Private targets are no longer allowed on this deployment"
        MISSED = "missed", "No worker cluster fired the schedule at that time"
        STARTED_LATE = "started_late", "Held back by the owner's running-audit limit, then started"
        DROPPED = "dropped", "Held back by the owner's running-audit limit, then the schedule was paused or unset"

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="skipped_runs")
    due_at = models.DateTimeField(help_text="The run time the schedule fired for")
    reason = models.CharField(max_length=20, choices=Reason.choices)
    detail = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = SkippedRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["site", "-created_at"], name="skippedrun_site_created"),
            # The runs waiting for a slot, oldest first: audits.schedules.start_waiting reads them every minute.
            models.Index(fields=["created_at"], name="skippedrun_held", condition=Q(reason="quota")),
        ]

    def __str__(self):
        return f"{self.site} skipped at {self.due_at}: {self.reason}"

"""What the screens, the admin and the CLI do to audits: create, cancel, resume, re-run.

Each one changes rows through the model's conditional transitions and enqueues
work only after the transaction commits, so a worker never sees an id whose row
is not there yet (and a rolled-back request enqueues nothing).
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone
from django_q.tasks import async_task

from config.client_ip import network_of

from . import validation
from .models import CRAWL_SETTINGS, Audit, Site
from .thresholds import overrides_of


def enqueue(func: str, *args, name: str, queue: str | None = None) -> None:
    """Enqueue a task once the current transaction commits (immediately outside one).

    ``queue`` is the cluster that runs it (``crawl_queue``); None, the crawl cluster.
    """
    options = {"cluster": queue} if queue else {}
    transaction.on_commit(lambda: async_task(func, *args, task_name=name, **options))


def crawl_queue(audit: Audit) -> str | None:
    """Where an audit's start and chunks run: a rendered audit's on the render cluster."""
    return settings.RENDER_QUEUE if audit.render != "none" else None


class QuotaExceeded(Exception):
    """The person already has as many audits running as they are allowed."""


class RateLimited(QuotaExceeded):
    """The person has created as many audits in the last hour as they are allowed.

    A QuotaExceeded, so every path that handles the quota shows it too.
    """

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


# Creations that count against SITEWARD_MAX_AUDITS_PER_HOUR: a person's (the form,
# re-run, run now); schedules and the command are bounded by their operators.
RATE_LIMITED_TRIGGERS = (Audit.Trigger.MANUAL,)
RATE_WINDOW = timedelta(hours=1)
RESUMABLE = (Audit.Status.FAILED, Audit.Status.CANCELLED)


class PrivateTargetsRefused(Exception):
    """The audit was allowed private addresses, and this deployment no longer allows them."""


def private_targets_allowed(audit: Audit | Site) -> bool:
    """Whether ``audit`` (or a site) may run again (resume, re-run, a scheduled run) as far as private targets go.

    An audit created with allow_private keeps that power only while the deployment
    allows private targets: turning SITEWARD_ALLOW_PRIVATE off must not leave old
    audits able to reach internal addresses. What a crawl's guard then admits is
    ``audits.crawl.setup.may_reach_private``.
    """
    return not audit.allow_private or bool(settings.SITEWARD["ALLOW_PRIVATE_TARGETS"])


def _refuse_private_targets(target: Audit | Site) -> None:
    if not private_targets_allowed(target):
        what = f"Audit {target.pk}" if isinstance(target, Audit) else f"The site {target.start_url}"
        raise PrivateTargetsRefused(f"{what} targeted a private address, which is no longer allowed.")


class SourceGone(Exception):
    """The audit a delta crawl or a validation would start from is being deleted."""


def refuse_deleting_source(source: Audit) -> None:
    """Raise SourceGone if ``source`` is being deleted; else keep it locked for the caller's transaction,
    so ``purge.purge_audit`` waits to see the new audit among those that reuse it."""
    with transaction.atomic():
        if not Audit.objects.select_for_update().filter(pk=source.pk, deleting=False).exists():
            raise SourceGone(f"Audit {source.pk} is being deleted: nothing can start from it.")


def new_audit(owner, *, trigger: str = Audit.Trigger.MANUAL, site: Site | None = None, **limits) -> Audit:
    """The audit row, on the owner's site for its start URL (created, or reused with these settings).

    Only the row: ``create_audit`` also applies the quota and enqueues the start;
    the ``audit`` command runs the crawl itself. SourceGone if it would start from an audit being deleted.
    """
    if limits.get("source") is not None:
        refuse_deleting_source(limits["source"])
    if site is None:
        # A CI job's limits (--max-pages 50 after a deploy) must not become the site's nightly crawl.
        site = Site.objects.for_start_url(
            owner, limits["start_url"], keep=trigger == Audit.Trigger.COMMAND,
            **{name: limits[name] for name in CRAWL_SETTINGS if name in limits})
    if site.deleting:  # its deletion would take the new audit with it
        raise SiteBusy("This site is being deleted with its audits; audit it again once it is gone from the list.")
    return Audit.objects.create(owner=owner, site=site, trigger=trigger, **limits)


def admit(owner, *, creating: str | None = None, address: str | None = None) -> None:
    """Whether ``owner`` may make one more audit active; raises QuotaExceeded (or RateLimited) if not.

    The one decision for every path that makes an audit active: ``create_audit``
    (the form, re-run, run now, a scheduled run, the admin's re-run) and
    ``resume_audit`` (the screens and the admin). Call it inside the transaction
    that then makes the audit active. ``creating`` is the new audit's trigger
    (None for a resume); a manual one also counts against the hourly creation
    limits: the person's, and that of ``address``, the network the request
    came from (``network_of``), whoever is logged in there.

    It holds under concurrent requests: on PostgreSQL the owner's user row is
    locked for the transaction, then the address (an advisory lock); on SQLite,
    IMMEDIATE transactions already serialise writers, so the counts and the
    write cannot interleave.
    """
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    limit = settings.SITEWARD["MAX_RUNNING_AUDITS_PER_USER"]
    if running_count(owner) >= limit:
        raise QuotaExceeded(
            f"You already have {limit} audits queued or running; wait for one to finish or cancel one."
        )
    if creating not in RATE_LIMITED_TRIGGERS:
        return
    recent = Audit.objects.filter(trigger__in=RATE_LIMITED_TRIGGERS, created_at__gte=timezone.now() - RATE_WINDOW)
    _refuse_past_hourly(recent.filter(owner=owner), settings.SITEWARD["MAX_AUDITS_PER_HOUR"],
                        "You have started {n} audits in the last hour, the most allowed")
    if address:
        _lock_address(address)
        _refuse_past_hourly(recent.filter(created_from=address), settings.SITEWARD["MAX_AUDITS_PER_HOUR_PER_ADDRESS"],
                            "{n} audits have been started from your network address in the last hour, "
                            "the most allowed for one address")


def _refuse_past_hourly(recent, per_hour: int, said: str) -> None:
    """Raise RateLimited if ``recent`` (this hour's audits) holds ``per_hour`` already, saying when to try again.

    Counts rows: a deleted audit no longer counts (a ledger would need its own table).
    """
    created = list(recent.order_by("-created_at").values_list("created_at", flat=True)[:per_hour])
    if len(created) >= per_hour:
        wait = max(1, int((created[-1] + RATE_WINDOW - timezone.now()).total_seconds()) + 1)
        raise RateLimited(f"{said.format(n=per_hour)}; try again in {math.ceil(wait / 60)} minute(s).",
                          retry_after=wait)


# First key of the PostgreSQL advisory lock on a network address ("addr"); the
# second is the address's hashtext. Taken after the owner's row, as admit does.
ADDRESS_LOCK_SPACE = 0x61646472


def _lock_address(address: str) -> None:
    """Serialise, until the transaction ends, the admissions of audits started from ``address``.

    People from one address lock different user rows, so their counts could
    interleave on PostgreSQL; SQLite's IMMEDIATE transactions already serialise them.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [ADDRESS_LOCK_SPACE, address])


def create_audit(owner, *, enforce_quota: bool = True, trigger: str = Audit.Trigger.MANUAL,
                 site: Site | None = None, address: str | None = None, **limits) -> Audit:
    """Create a queued audit and enqueue its start, if ``admit`` allows it.

    ``enforce_quota=False`` is the ``audit`` command's: its operator runs it on the server.
    ``address``: where a person's request came from (``config.client_ip``), kept on the audit
    as the limit counts it (``network_of``).
    A person's audit (the form, re-run, a follow-up, run now) raises SiteBusy
    while the site has one active; a scheduled run skips instead (``schedules``).
    """
    address = network_of(address) if address else None
    with transaction.atomic():
        if enforce_quota:
            admit(owner, creating=trigger, address=address)
        if trigger == Audit.Trigger.MANUAL:
            refuse_busy_site(owner, site, limits["start_url"])
        audit = new_audit(owner, trigger=trigger, site=site, created_from=address, **limits)
        enqueue("audits.tasks.start", audit.pk, name=f"audit-{audit.pk}-start", queue=crawl_queue(audit))
    return audit


def cancel_audit(audit: Audit, by=None) -> bool:
    """Cancel an active audit. Running chunks see the status between sub-batches and stop.

    ``by`` (a user) is named in error_detail, which the audit page's banner
    shows with the time the audit ended: who stopped it needs no column.
    """
    if by is None:
        return audit.cancel()
    return audit.cancel(f"Cancelled by {by.get_username()}.")


def resume_audit(audit: Audit) -> bool:
    """Continue a failed or cancelled audit from its frontier instead of starting over.

    Raises PrivateTargetsRefused if private_targets_allowed says no, QuotaExceeded
    if ``admit`` does, or SiteBusy if another audit of the site is active, before
    any change. False if it cannot resume.
    """
    _refuse_private_targets(audit)
    with transaction.atomic():
        # Only a resumable audit is held to the quota: resuming a running one is a no-op, not a refusal.
        if not Audit.objects.filter(pk=audit.pk, status__in=RESUMABLE).exists():
            audit.refresh_from_db()
            return False
        admit(audit.owner)
        refuse_busy_site(audit.owner, audit.site, audit.start_url, besides=audit)
        if not audit.reopen_for_resume():
            return False
        enqueue("audits.tasks.resume", audit.pk, name=f"audit-{audit.pk}-resume", queue=crawl_queue(audit))
    return True


def rerun_audit(audit: Audit, *, address: str | None = None) -> Audit:
    """A fresh manual audit with the same settings and owner (``admit`` applies).

    Raises PrivateTargetsRefused if private_targets_allowed says no.
    """
    _refuse_private_targets(audit)
    fields = audit.settings_copy()
    if audit.mode != Audit.Mode.FULL and audit.source is not None:
        fields.update(follow_up_fields(audit.source, audit.mode))
    elif audit.mode == Audit.Mode.VALIDATE:
        fields["max_pages"] = audit.site.max_pages  # its source is gone: a full crawl with the site's limit
    return create_audit(audit.owner, site=audit.site, address=address, **fields)


def follow_up_fields(source: Audit, mode: str) -> dict:
    """A validation's or a delta crawl's own fields, beside the limits it runs with.

    A validation's page budget is what it re-checks, whatever its source's was;
    its baseline is its source, so finalize's diff is its verdict. What a person
    ignored since the source (``validation.settle_ignores``) is first marked on it.
    """
    fields = {"mode": mode, "source": source}
    if mode == Audit.Mode.VALIDATE:
        validation.settle_ignores(source)
        # Judged by the source's thresholds: a verdict says whether its issue is still there. By those it judged by,
        # when it kept them: an upgrade since may have changed a default it did not set.
        fields["thresholds"] = overrides_of(source.judged_by) if source.judged_by else source.thresholds
        fields["judged_by"] = source.judged_by
        # Plus the start step's rows: two when the start URL redirects (the typed
        # URL and where it lands). A validation queues only its seeds, so a spare
        # row is never spent on anything else.
        fields.update(baseline=source, max_pages=validation.page_count(source) + 2)
    return fields


def make_follow_up(audit: Audit, source: Audit, mode: str) -> None:
    """Make the new ``audit`` a validation or delta run of ``source``: the ``audit`` command's way, whose
    audit exists before its mode is applied, so a validation's page budget is not saved as the site's.

    A validation crawls as its source did (depth, patterns, robots, user agent,
    rendering), as the dashboard's does: read another way, a page could lose an
    issue it still has. Only whether private addresses may be reached stays the command's.
    """
    fields = follow_up_fields(source, mode)
    if mode == Audit.Mode.VALIDATE:
        copied = source.settings_copy()
        copied.pop("allow_private")
        fields = {**copied, **fields}
    with transaction.atomic():
        refuse_deleting_source(source)
        Audit.objects.filter(pk=audit.pk).update(**fields)
    for name, value in fields.items():
        setattr(audit, name, value)


def command_owner(username: str | None):
    """Who owns the ``audit`` command's audits: the named user (None if there is none), else "admin",
    else a "cli" user made once, with no password to log in with."""
    User = get_user_model()
    if username:
        return User.objects.filter(username=username).first()
    with transaction.atomic():
        user = User.objects.filter(username="admin").first()
        if user is None:
            user, created = User.objects.get_or_create(username="cli")
            if created:
                user.set_unusable_password()
                user.save(update_fields=["password"])
    return user


def follow_up(source: Audit, mode: str, *, address: str | None = None) -> Audit:
    """A manual validation or delta crawl of ``source``'s site, with its settings (``admit`` applies).

    Raises PrivateTargetsRefused if private_targets_allowed says no.
    """
    _refuse_private_targets(source)
    return create_audit(source.owner, site=source.site, address=address,
                        **{**source.settings_copy(), **follow_up_fields(source, mode)})


def lock_site(site: Site) -> Site | None:
    """Lock the owner's row, then the site's (None if it is gone), for the rest of the transaction.

    In that order because ``admit`` and a new audit's site update take them so: one
    order everywhere, so a press, a fire and the form never deadlock on PostgreSQL.
    """
    get_user_model().objects.select_for_update().filter(pk=site.owner_id).first()
    return Site.objects.select_for_update().filter(pk=site.pk).first()


class SiteBusy(Exception):
    """The site already has an audit queued or running: a second would double the load on it."""


def refuse_busy_site(owner, site: Site | None, start_url: str, *, besides: Audit | None = None) -> None:
    """Raise SiteBusy if the owner's site (``site``, else the one for ``start_url``) has an active audit.

    Call it inside the transaction that then makes an audit active. The site's
    row lock (``lock_site``) makes two requests at once, or a request and a
    scheduled fire, start one audit; a site not made yet is guarded by the
    owner's row, which ``lock_site`` takes first too. ``besides``: an audit
    being resumed, which a second press of Resume may just have made active.
    """
    site = site or Site.objects.filter(owner=owner, start_url=start_url).first()
    if site is None:
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        return
    lock_site(site)
    active = site.audits.filter(status__in=Audit.ACTIVE).exclude(pk=besides.pk if besides else None).order_by("pk").first()
    if active is not None:
        raise SiteBusy(f"An audit of this site is already queued or running (audit {active.pk}); "
                       "wait for it to finish, or cancel it, before starting another.")


def run_site_now(site: Site, *, address: str | None = None) -> Audit:
    """An audit of ``site`` with its saved settings, started by a person.

    Raises PrivateTargetsRefused, QuotaExceeded or SiteBusy (``create_audit``),
    before anything is written.
    """
    _refuse_private_targets(site)
    return create_audit(site.owner, site=site, start_url=site.start_url, address=address,
                        **site.crawl_settings())


def running_count(owner) -> int:
    return Audit.objects.filter(owner=owner, status__in=Audit.ACTIVE).count()

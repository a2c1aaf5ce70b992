"""What the screens, the admin and the CLI do to audits: create, cancel, resume, re-run.

Each one changes rows through the model's conditional transitions and enqueues
work only after the transaction commits, so a worker never sees an id whose row
is not there yet (and a rolled-back request enqueues nothing).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django_q.tasks import async_task

from .models import CRAWL_SETTINGS, Audit, Site


def enqueue(func: str, *args, name: str) -> None:
    """Enqueue a task once the current transaction commits (immediately outside one)."""
    transaction.on_commit(lambda: async_task(func, *args, task_name=name))


class QuotaExceeded(Exception):
    """The person already has as many audits running as they are allowed."""


class PrivateTargetsRefused(Exception):
    """The audit was allowed private addresses, and this deployment no longer allows them."""


def private_targets_allowed(audit: Audit | Site) -> bool:
    """Whether ``audit`` (or a site) may run again (resume, re-run, a scheduled run) as far as private targets go.

    An audit created with allow_private keeps that power only while the deployment
    allows private targets: turning SITEWARD_ALLOW_PRIVATE off must not leave old
    audits able to reach internal addresses.
    """
    return not audit.allow_private or bool(settings.SITEWARD["ALLOW_PRIVATE_TARGETS"])


def _refuse_private_targets(target: Audit | Site) -> None:
    if not private_targets_allowed(target):
        what = f"Audit {target.pk}" if isinstance(target, Audit) else f"The site {target.start_url}"
        raise PrivateTargetsRefused(f"{what} targeted a private address, which is no longer allowed.")


def new_audit(owner, *, trigger: str = Audit.Trigger.MANUAL, site: Site | None = None, **limits) -> Audit:
    """The audit row, on the owner's site for its start URL (created, or reused with these settings).

    Only the row: ``create_audit`` also applies the quota and enqueues the start;
    the ``audit`` command runs the crawl itself.
    """
    if site is None:
        site = Site.objects.for_start_url(
            owner, limits["start_url"], **{name: limits[name] for name in CRAWL_SETTINGS if name in limits})
    return Audit.objects.create(owner=owner, site=site, trigger=trigger, **limits)


def create_audit(owner, *, enforce_quota: bool = True, trigger: str = Audit.Trigger.MANUAL,
                 site: Site | None = None, **limits) -> Audit:
    """Create a queued audit and enqueue its start, refusing past the running-audit quota.

    The quota holds under concurrent submissions: on PostgreSQL the owner's user
    row is locked for the transaction; on SQLite, IMMEDIATE transactions already
    serialise writers, so the count and the insert cannot interleave.
    """
    with transaction.atomic():
        if enforce_quota:
            get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
            limit = settings.SITEWARD["MAX_RUNNING_AUDITS_PER_USER"]
            if running_count(owner) >= limit:
                raise QuotaExceeded(
                    f"You already have {limit} audits queued or running; wait for one to finish or cancel one."
                )
        audit = new_audit(owner, trigger=trigger, site=site, **limits)
        enqueue("audits.tasks.start", audit.pk, name=f"audit-{audit.pk}-start")
    return audit


def cancel_audit(audit: Audit) -> bool:
    """Cancel an active audit. Running chunks see the status between sub-batches and stop."""
    return audit.cancel()


def resume_audit(audit: Audit) -> bool:
    """Continue a failed or cancelled audit from its frontier instead of starting over.

    Raises PrivateTargetsRefused, before any change, if private_targets_allowed says no.
    """
    _refuse_private_targets(audit)
    with transaction.atomic():
        if not audit.reopen_for_resume():
            return False
        enqueue("audits.tasks.resume", audit.pk, name=f"audit-{audit.pk}-resume")
    return True


def rerun_audit(audit: Audit) -> Audit:
    """A fresh audit with the same settings and owner (subject to the same quota).

    Raises PrivateTargetsRefused if private_targets_allowed says no.
    """
    _refuse_private_targets(audit)
    return create_audit(audit.owner, site=audit.site, **audit.settings_copy())


def run_site_now(site: Site) -> Audit:
    """An audit of ``site`` with its saved settings, started by a person (quota applies).

    Raises PrivateTargetsRefused or QuotaExceeded, before anything is written.
    """
    _refuse_private_targets(site)
    return create_audit(site.owner, site=site, start_url=site.start_url, **site.crawl_settings())


def running_count(owner) -> int:
    return Audit.objects.filter(owner=owner, status__in=Audit.ACTIVE).count()

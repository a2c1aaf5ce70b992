"""Resuming a failed or cancelled audit from its frontier, keeping everything it found."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from ..dispatch import Dispatcher
from ..models import Audit, ChunkLease, FrontierURL
from .progress import advance
from .start import run_start


def run_resume(audit_id: int, dispatcher: Dispatcher | None = None) -> None:
    """Continue a failed or cancelled audit (already re-queued) from its frontier."""
    dispatcher = dispatcher or Dispatcher()
    audit = Audit.objects.get(pk=audit_id)
    if audit.status != Audit.Status.QUEUED:
        return
    if not audit.origin:  # it never got past start: start again
        run_start(audit_id, dispatcher)
        return
    with transaction.atomic():
        if not audit.resume_crawl():
            return
        # The dead run's leases are void; their URLs go back to the frontier.
        ChunkLease.objects.filter(audit=audit).void()
        FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.LEASED).release()
        last = ChunkLease.objects.filter(audit=audit).aggregate(n=Max("number"))["n"] or 0
        advance(audit, last, dispatcher)

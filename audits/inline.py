"""Running an audit's steps in-process, for the `audit` command (and the tests that mirror it).

The worker cluster schedules each next step as a task; here an InlineDispatcher
collects them and this loop runs them, one after another, on this thread.
"""

import time
from collections.abc import Callable

from django.db import transaction

from .crawl.chunk import run_chunk
from .crawl.progress import advance
from .crawl.start import run_start
from .dispatch import InlineDispatcher
from .finalize import run_finalize
from .models import Audit

STEP_LIMIT = 1_000_000  # every loop has a cap; a real crawl never comes near it
# A wait for rate-limited URLs (or the site's pause) sleeps in slices this long, checking in between
# that the audit is still running, so a cancel from the dashboard is seen soon.
WAIT_SLICE = 5.0


def run_steps(dispatcher: InlineDispatcher, *, on_batch=None,
              finalize: Callable[[int], object] = run_finalize) -> None:
    for _ in range(STEP_LIMIT):
        if not dispatcher.steps:
            return
        step, audit_id, number = dispatcher.steps.pop(0)
        if step == "chunk":
            run_chunk(audit_id, number, dispatcher, on_batch=on_batch)
        elif step == "wait":
            _wait_then_advance(dispatcher, audit_id, after=number)
        else:
            finalize(audit_id)


def _wait_then_advance(dispatcher: InlineDispatcher, audit_id: int, after: int) -> None:
    """Sleep until the first rate-limited URL is due, or the site's pause ends, then schedule the next step."""
    remaining = dispatcher.pauses.pop((audit_id, after + 1), 0.0)
    dispatcher.on_wait(remaining)
    while remaining > 0:
        piece = min(remaining, WAIT_SLICE)
        dispatcher.sleep(piece)
        remaining -= piece
        if not Audit.objects.filter(pk=audit_id, status=Audit.Status.RUNNING).exists():
            return  # cancelled (or failed) meanwhile: nothing more to run
    audit = Audit.objects.get(pk=audit_id)
    with transaction.atomic():
        advance(audit, after, dispatcher)


def run_audit_inline(audit_id: int, *, on_batch=None, finalize: Callable[[int], object] = run_finalize,
                     sleep: Callable[[float], object] = time.sleep,
                     on_wait: Callable[[float], object] = lambda seconds: None) -> None:
    """Start, crawl and finalize one audit on this thread.

    When only rate-limited URLs are left, or the site asked to be left alone
    for a while (Retry-After), ``on_wait`` is told how long the wait
    is and ``sleep`` waits it out in slices.
    """
    dispatcher = InlineDispatcher(sleep=sleep, on_wait=on_wait)
    run_start(audit_id, dispatcher, on_batch=on_batch)
    run_steps(dispatcher, on_batch=on_batch, finalize=finalize)

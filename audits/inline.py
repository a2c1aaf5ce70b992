"""Running an audit's steps in-process, for the `audit` command (and the tests that mirror it).

The worker cluster schedules each next step as a task; here an InlineDispatcher
collects them and this loop runs them, one after another, on this thread.
"""

import time
from collections.abc import Callable

from .crawling import InlineDispatcher, run_chunk, run_start
from .finalize import run_finalize

STEP_LIMIT = 1_000_000  # every loop has a cap; a real crawl never comes near it


def run_steps(dispatcher: InlineDispatcher, *, on_batch=None,
              finalize: Callable[[int], object] = run_finalize) -> None:
    for _ in range(STEP_LIMIT):
        if not dispatcher.steps:
            return
        step, audit_id, number = dispatcher.steps.pop(0)
        if step == "chunk":
            run_chunk(audit_id, number, dispatcher, on_batch=on_batch)
        else:
            finalize(audit_id)


def run_audit_inline(audit_id: int, *, on_batch=None, finalize: Callable[[int], object] = run_finalize,
                     sleep: Callable[[float], object] = time.sleep) -> None:
    """Start, crawl and finalize one audit on this thread.

    ``sleep`` waits out a Retry-After when only rate-limited URLs are left.
    """
    dispatcher = InlineDispatcher(sleep=sleep)
    run_start(audit_id, dispatcher, on_batch=on_batch)
    run_steps(dispatcher, on_batch=on_batch, finalize=finalize)

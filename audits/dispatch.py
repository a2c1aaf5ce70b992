"""How an audit's next step runs: as a django-q2 task, or in this process for the `audit` command.

Only the scheduling differs; the steps themselves (``audits.crawl``, ``finalize``)
are the same code either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from .services import enqueue

log = logging.getLogger(__name__)

# The longest a Retry-After may hold an audit's next step (seconds).
RETRY_AFTER_RESCHEDULE_CAP = 600.0


class Dispatcher:
    """The worker cluster's: each step is a task enqueued after the caller's transaction commits."""

    def chunk(self, audit_id: int, number: int, queue: str | None = None) -> None:
        enqueue("audits.tasks.crawl_chunk", audit_id, number, name=f"audit-{audit_id}-chunk-{number}",
                queue=queue)

    def finalize(self, audit_id: int) -> None:
        enqueue("audits.tasks.finalize", audit_id, name=f"audit-{audit_id}-finalize")

    def chunks_per_audit(self) -> int:
        """How many of one audit's chunks may run at once, on any of the clusters."""
        return settings.SITEWARD["CHUNKS_PER_AUDIT"]

    def wait(self, audit_id: int, after: int, seconds: float) -> None:
        """Nothing can start for ``seconds`` (the rate-limited URLs left are not due yet, or the site's
        Retry-After pause runs): schedule nothing yet.

        django-q2 cannot delay a task, and a chunk that slept would hold a worker,
        so the watchdog (every 30 s) advances the audit once the wait is over.
        """
        log.info("audit %s: waiting %.0f s for a Retry-After before chunk %s", audit_id, seconds, after + 1)

    def given_back(self, audit_id: int, number: int) -> None:
        """A chunk that could not write was queued again: the watchdog enqueues it after its grace."""

    def mark(self) -> int:
        """Where the steps scheduled so far end (see forget_since)."""
        return 0

    def forget_since(self, mark: int) -> None:
        """Drop steps scheduled after ``mark`` by a transaction that rolled back.

        Nothing to do here: an enqueue waits for its transaction's commit.
        """


@dataclass
class InlineDispatcher(Dispatcher):
    """The `audit` command's: remember the next step; the command's loop (``audits.inline``) runs it.

    Steps run only after the call that scheduled them has returned, and so after
    its transaction committed; a step whose transaction rolled back finds its
    chunk row missing or its audit in another state and does nothing.
    """

    steps: list[tuple[str, int, int]] = field(default_factory=list)
    # Nothing else runs in this process while rate-limited URLs wait, so the
    # loop sleeps until the first is due, in slices of `sleep`.
    sleep: Callable[[float], object] = time.sleep
    # Told once per wait, with its length (the command prints it).
    on_wait: Callable[[float], object] = lambda seconds: None
    pauses: dict[tuple[int, int], float] = field(default_factory=dict)

    def chunk(self, audit_id: int, number: int, queue: str | None = None) -> None:
        self.steps.append(("chunk", audit_id, number))

    def finalize(self, audit_id: int) -> None:
        self.steps.append(("finalize", audit_id, 0))

    def chunks_per_audit(self) -> int:
        return 1  # the loop runs one step at a time

    def given_back(self, audit_id: int, number: int) -> None:
        # The command has no watchdog: its loop runs the chunk again.
        self.chunk(audit_id, number)

    def mark(self) -> int:
        return len(self.steps)

    def forget_since(self, mark: int) -> None:
        # Steps here are not tied to a commit, so a rolled-back try's are dropped by hand.
        del self.steps[mark:]

    def wait(self, audit_id: int, after: int, seconds: float) -> None:
        # No lease row for the next chunk yet: during the wait nothing is open,
        # so the watchdog sees an audit waiting as the site asked, not a chunk
        # lost or a stall. The loop advances after the wait.
        self.pauses[(audit_id, after + 1)] = min(seconds, RETRY_AFTER_RESCHEDULE_CAP)
        self.steps.append(("wait", audit_id, after))

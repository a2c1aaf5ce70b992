"""How the window's scheduler (``crawler.window.run_window``) sleeps: on one wake event, set by a
settled item, the sink's consumer, or one loop timer kept across sleeps (``Alarm``).
"""

from __future__ import annotations

import asyncio
import time


class Alarm:
    """One loop timer that sets the wake event at a given time, kept across waits.

    The scheduler sleeps once per settled item or so, and most sleeps end at
    the same time as the one before (a batch's age limit, the soft deadline):
    re-arming only when that time changes saves a timer per sleep, and a timer
    costs the loop about as much as the rest of a sleep.
    """

    __slots__ = ("wake", "at", "handle")

    def __init__(self, wake: asyncio.Event) -> None:
        self.wake = wake
        self.at: float | None = None
        self.handle: asyncio.TimerHandle | None = None

    def arm(self, at: float | None) -> None:
        """Set the wake event at ``at`` (monotonic seconds); None: no timer."""
        if at == self.at:
            return
        self.disarm()
        if at is not None:
            self.at = at
            self.handle = asyncio.get_running_loop().call_later(max(0.0, at - time.monotonic()), self._ring)

    def disarm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.at = self.handle = None

    def _ring(self) -> None:
        self.at = self.handle = None  # spent: the same time arms a new one
        self.wake.set()


async def wait_for_wake(wake: asyncio.Event, consumer: asyncio.Task, alarm: Alarm | None = None,
                        wake_at: float | None = None) -> None:
    """Wait for the wake event; with the scheduler's ``alarm``, at most until
    ``wake_at`` (monotonic seconds), its timer left armed for the next wait."""
    if wake.is_set() or consumer.done():
        wake.clear()
        return
    if alarm is not None:
        alarm.arm(wake_at)
    try:
        await wake.wait()
    finally:
        wake.clear()

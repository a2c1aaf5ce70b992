"""Work that runs beside the rolling window: slots of its own, a per-host limit, no say in its size.

An audit's external link checks run here (``audits.crawl.chunk``). They are
other sites' answers: however slow or failing they are (a run of nameservers
that take the whole DNS timeout to fail, say), they must neither hold the
audited site's window slots nor shrink its window, which judges the site's
health from the site's own results alone. ``run_window`` takes the lane and a
test for which items go in it; the items share the window's sink, back-pressure
and soft deadline.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class SideLane:
    """At most ``slots`` items at once, at most ``per_host`` on one host; no spacing between starts.

    A rate or Crawl-delay is the audited site's own request, so it does not
    space starts here; two at once per host is the politeness owed to a site
    we only link to.
    """

    slots: int = 8
    per_host: int = 2

    def __post_init__(self) -> None:
        if self.slots < 1 or self.per_host < 1:
            raise ValueError("a side lane needs at least one slot and one per host")


class SideQueue(Generic[T]):
    """The lane's items waiting per host (taken in turn, one per host) and what runs per host."""

    def __init__(self, lane: SideLane) -> None:
        self.lane = lane
        # (input index, item) per host; dict order is the round-robin order.
        self.waiting: dict[str, deque[tuple[int, T]]] = {}
        self.queued = 0
        self.running = 0
        self.host_running: dict[str, int] = {}

    def add(self, host: str, entry: tuple[int, T]) -> None:
        self.waiting.setdefault(host, deque()).append(entry)
        self.queued += 1

    def take(self) -> list[tuple[str, T]]:
        """The items to start now, counted as running: one per host in turn until the slots are full.

        A host that gave an item goes to the back. Each round looks at every
        waiting host once and ends the call unless it started something, so
        a call starts at most the free slots' worth in at most that many
        rounds; and as hosts at their limit number at most slots/per_host, a
        round stops after about as many hosts as it has free slots.
        """
        started: list[tuple[str, T]] = []
        slots, per_host = self.lane.slots, self.lane.per_host
        while self.running < slots and self.waiting:
            progress = False
            for _ in range(len(self.waiting)):
                if self.running >= slots:
                    break
                host = next(iter(self.waiting))
                queued = self.waiting.pop(host)
                if self.host_running.get(host, 0) < per_host:
                    _, item = queued.popleft()
                    self.queued -= 1
                    self.running += 1
                    self.host_running[host] = self.host_running.get(host, 0) + 1
                    started.append((host, item))
                    progress = True
                if queued:
                    self.waiting[host] = queued
            if not progress:
                break
        return started

    def settled(self, host: str) -> None:
        self.running -= 1
        left = self.host_running[host] - 1
        if left:
            self.host_running[host] = left
        else:
            del self.host_running[host]  # one entry per host running, not per host ever seen

    def drain(self) -> list[tuple[int, T]]:
        """Everything still waiting, taken out (the soft deadline has passed)."""
        entries = [entry for queued in self.waiting.values() for entry in queued]
        self.waiting.clear()
        self.queued = 0
        return entries

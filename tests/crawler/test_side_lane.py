"""The window's side lane (an audit's external checks): its own slots and per-host limit,
no say in the window's size, the same deadline, and a bounded backlog.

Pure asyncio, like tests/crawler/test_window.py: items say how long they take and
what health they report; nothing touches the network.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest

from crawler import window as window_module
from crawler.side_lane import SideLane
from crawler.window import WindowPolicy, run_window


@dataclass(frozen=True)
class Job:
    name: str
    side: bool = False
    host: str = "site"
    delay: float = 0.01
    health: str = "ok"


class Lanes:
    """Counts what runs in each lane, overall and per host, and when each job ended."""

    def __init__(self) -> None:
        self.running = {True: 0, False: 0}
        self.peak = {True: 0, False: 0}
        self.per_host: dict[str, int] = {}
        self.peak_per_host: dict[str, int] = {}
        self.ended: dict[str, float] = {}

    async def work(self, job: Job) -> Job:
        self.running[job.side] += 1
        self.peak[job.side] = max(self.peak[job.side], self.running[job.side])
        self.per_host[job.host] = self.per_host.get(job.host, 0) + 1
        self.peak_per_host[job.host] = max(self.peak_per_host.get(job.host, 0), self.per_host[job.host])
        try:
            await asyncio.sleep(job.delay)
        finally:
            self.running[job.side] -= 1
            self.per_host[job.host] -= 1
        self.ended[job.name] = time.monotonic()
        return job


def run(jobs, lanes: Lanes, *, policy: WindowPolicy, lane: SideLane, **kwargs):
    sunk: list[Job] = []

    async def sink(batch: list[Job]) -> None:
        sunk.extend(batch)

    async def go():
        return await run_window(
            jobs, lanes.work, sink, policy=policy, host_of=lambda job: job.host,
            health_of=lambda job: job.health, side_lane=lane, in_side_lane=lambda job: job.side,
            **kwargs)

    return asyncio.run(go()), sunk


FIXED = WindowPolicy(floor=2, start=2, cap=2, per_host=2)


def test_slow_side_jobs_take_none_of_the_windows_slots():
    # Side jobs first in the input, each far slower than all the pages together.
    jobs = [Job(f"ext{n}", side=True, host=f"ext{n}.test", delay=0.5) for n in range(6)]
    jobs += [Job(f"page{n}") for n in range(10)]
    lanes = Lanes()
    began = time.monotonic()

    report, sunk = run(jobs, lanes, policy=FIXED, lane=SideLane(slots=4, per_host=2))

    pages = [lanes.ended[f"page{n}"] for n in range(10)]
    externals = [lanes.ended[f"ext{n}"] for n in range(6)]
    assert max(pages) < min(externals)  # every page was done before the first external
    assert max(pages) - began < 0.4  # ten 10 ms pages, two at a time, no waiting on externals
    assert lanes.peak == {False: 2, True: 4}
    assert report.max_in_flight == 2  # the window's own
    assert sorted(job.name for job in sunk) == sorted(job.name for job in jobs)


def test_the_side_lane_runs_at_most_its_per_host_limit_on_one_host():
    jobs = [Job(f"{host}{n}", side=True, host=host, delay=0.02) for host in ("a.test", "b.test") for n in range(8)]
    lanes = Lanes()

    report, _ = run(jobs, lanes, policy=FIXED, lane=SideLane(slots=8, per_host=2))

    assert report.done == 16
    assert lanes.peak_per_host == {"a.test": 2, "b.test": 2}
    assert lanes.peak[True] == 4


def test_hosts_take_turns_in_the_side_lane():
    # One host with many jobs must not hold the lane while another waits behind it.
    jobs = [Job(f"busy{n}", side=True, host="busy.test", delay=0.05) for n in range(6)]
    jobs.append(Job("other", side=True, host="other.test", delay=0.05))
    lanes = Lanes()

    run(jobs, lanes, policy=FIXED, lane=SideLane(slots=2, per_host=2))

    assert lanes.ended["other"] < sorted(lanes.ended[f"busy{n}"] for n in range(6))[2]


def test_failing_side_jobs_leave_the_window_as_the_site_left_it():
    policy = WindowPolicy(floor=1, start=4, cap=8, per_host=8, grow_after=100)
    jobs = [Job(f"ext{n}", side=True, host=f"ext{n}.test", health="error") for n in range(30)]
    jobs += [Job(f"page{n}") for n in range(20)]
    lanes = Lanes()

    report, _ = run(jobs, lanes, policy=policy, lane=SideLane(slots=8, per_host=2))

    assert report.shrinks == 0 and report.final == 4
    assert report.health == {"ok": 20}  # the site's results only


def test_side_jobs_not_started_by_the_deadline_come_back_in_input_order():
    jobs = [Job(f"ext{n}", side=True, host="one.test", delay=0.3) for n in range(5)]
    jobs.insert(2, Job("page"))
    lanes = Lanes()
    deadline = time.monotonic() + 0.1

    report, sunk = run(jobs, lanes, policy=FIXED, lane=SideLane(slots=8, per_host=2), soft_deadline=deadline)

    assert [job.name for job in report.unfinished] == ["ext2", "ext3", "ext4"]
    assert sorted(job.name for job in sunk) == ["ext0", "ext1", "page"]


def test_refills_pause_while_the_side_lanes_backlog_is_full(monkeypatch):
    monkeypatch.setattr(window_module, "SIDE_BACKLOG_MAX", 30)
    asked: list[int] = []

    async def refill() -> list[Job]:
        # An endless supply of slow side jobs, as a frontier full of external links
        # behind failing DNS would give.
        asked.append(len(asked))
        return [Job(f"ext{len(asked)}-{n}", side=True, host=f"h{len(asked)}-{n}.test", delay=0.3) for n in range(10)]

    lanes = Lanes()
    report, _ = run([], lanes, policy=FIXED, lane=SideLane(slots=2, per_host=2), refill=refill,
                    soft_deadline=time.monotonic() + 0.2)

    # 10, 18, 28 waiting after each answer: the fourth answer reaches the cap.
    assert len(asked) == 4
    assert len(report.unfinished) == 38


def test_a_side_lane_needs_its_test():
    async def nothing(batch) -> None:
        pass

    with pytest.raises(ValueError, match="go together"):
        asyncio.run(run_window([], Lanes().work, nothing, policy=FIXED, host_of=lambda job: job.host,
                               health_of=lambda job: job.health, side_lane=SideLane()))

"""The window under a share of a budget other chunks also use: its limit holds, moves live, and splits the rate."""

from __future__ import annotations

import asyncio

from crawler.share import Share
from crawler.window import WindowPolicy, run_window

from .test_window import SCHEDULING_SLACK, Job, Probe, Sink, run


def test_the_share_limits_what_runs_at_once_below_the_window_and_records_it():
    probe, sink = Probe(), Sink()
    share = Share(limit=3)
    report = run([Job(i, delay=0.01) for i in range(40)], probe, sink, WindowPolicy(start=8, cap=8), share=share)
    assert report.done == 40
    assert probe.max_running == 3
    assert report.max_in_flight == 3


def test_a_window_with_no_share_yet_waits_and_starts_once_it_gets_one():
    probe, sink = Probe(), Sink()
    share = Share(limit=0)

    async def scenario():
        async def grant():
            await asyncio.sleep(0.3)
            assert probe.starts == []  # nothing ran on a share of nothing
            share.limit = 2

        granted = asyncio.create_task(grant())
        report = await run_window([Job(i, delay=0.01) for i in range(10)], probe.work, sink,
                                  policy=WindowPolicy(start=4, cap=4), host_of=lambda job: job.host,
                                  health_of=lambda job: job.health, share=share)
        await granted
        return report

    report = asyncio.run(scenario())
    assert report.done == 10 and probe.max_running == 2


def test_a_shrinking_share_stops_new_starts_until_what_runs_fits_it():
    probe, sink = Probe(), Sink()
    share = Share(limit=6)
    seen_after_shrink: list[int] = []

    async def scenario():
        async def shrink():
            await asyncio.sleep(0.05)
            share.limit = 2
            await asyncio.sleep(0.1)  # the requests started before the shrink have ended by now
            seen_after_shrink.append(probe.max_running)
            probe.max_running = 0

        shrinking = asyncio.create_task(shrink())
        await run_window([Job(i, delay=0.04) for i in range(60)], probe.work, sink,
                         policy=WindowPolicy(start=6, cap=6), host_of=lambda job: job.host,
                         health_of=lambda job: job.health, share=share)
        await shrinking

    asyncio.run(scenario())
    assert seen_after_shrink == [6]  # it had six at once before the shrink
    assert probe.max_running <= 2  # and never more than two after it
    assert share.in_flight <= 2


def test_the_rate_is_split_between_the_chunks_sharing_it():
    probe, sink = Probe(), Sink()
    jobs = [Job(i, delay=0.0) for i in range(4)]
    run(jobs, probe, sink, WindowPolicy(start=4, cap=4, rate=20.0), share=Share(limit=4, parts=2))
    times = [at for at, _, _ in probe.starts]
    assert min(later - earlier for earlier, later in zip(times, times[1:], strict=False)) >= 0.1 - SCHEDULING_SLACK  # 1/(20/2), where unshared it is 0.05

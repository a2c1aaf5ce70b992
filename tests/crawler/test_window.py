"""The rolling window, driven by a fake async work function with set delays and health.

The window is pure asyncio (no network), so these tests run it over items that
say how long they take, what health they report and which host they belong to,
and observe concurrency, spacing and sink calls as they happen.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest

from crawler.types import FetchError, FetchResult
from crawler.window import REFILL_LEAD_MAX, WindowPolicy, fetch_health, next_refill_lead, run_window


@dataclass(frozen=True)
class Job:
    name: int
    host: str = "a"
    delay: float = 0.005
    health: str = "ok"
    fail: bool = False


# The window spaces its decisions to start; the probe sees a start when the
# loop first runs the task, which on a loaded machine lags by milliseconds.
SCHEDULING_SLACK = 0.015


class Probe:
    """Records what the work function sees: concurrency overall and per host, start times."""

    def __init__(self) -> None:
        self.running = 0
        self.max_running = 0
        self.per_host: dict[str, int] = {}
        self.max_per_host: dict[str, int] = {}
        self.starts: list[tuple[float, Job, int]] = []  # (time, job, running incl. itself)
        self.finished: list[int] = []
        self.cancelled: list[int] = []

    async def work(self, job: Job) -> Job:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        count = self.per_host.get(job.host, 0) + 1
        self.per_host[job.host] = count
        self.max_per_host[job.host] = max(self.max_per_host.get(job.host, 0), count)
        self.starts.append((time.monotonic(), job, self.running))
        try:
            await asyncio.sleep(job.delay)
            if job.fail:
                raise RuntimeError(f"bug in work for {job.name}")
            self.finished.append(job.name)
            return job
        except asyncio.CancelledError:
            self.cancelled.append(job.name)
            raise
        finally:
            self.running -= 1
            self.per_host[job.host] -= 1


class Sink:
    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.delay = delay
        self.fail = fail
        self.batches: list[list[int]] = []
        self.active = False
        self.overlapped = False

    async def __call__(self, batch: list[Job]) -> None:
        if self.active:
            self.overlapped = True
        self.active = True
        try:
            if self.fail:
                raise ValueError("sink is broken")
            await asyncio.sleep(self.delay)
            self.batches.append([job.name for job in batch])
        finally:
            self.active = False

    @property
    def received(self) -> list[int]:
        return [name for batch in self.batches for name in batch]


def run(jobs, probe, sink, policy, **kwargs):
    kwargs.setdefault("soft_deadline", None)
    return asyncio.run(
        run_window(
            jobs,
            probe.work,
            sink,
            policy=policy,
            host_of=lambda job: job.host,
            health_of=lambda job: job.health,
            **kwargs,
        )
    )


def test_window_grows_to_the_cap_on_clean_fast_results():
    probe, sink = Probe(), Sink()
    jobs = [Job(i) for i in range(80)]
    report = run(jobs, probe, sink, WindowPolicy(floor=1, start=2, cap=8, per_host=8, grow_after=2))
    assert report.done == 80
    assert report.peak == 8 and report.final == 8
    assert probe.max_running == 8
    # It started small: the first starts ran with at most the starting window.
    assert max(running for _, _, running in probe.starts[:2]) <= 2
    assert sorted(sink.received) == list(range(80))


def test_window_halves_on_errors_down_to_the_floor_and_stays_there():
    probe, sink = Probe(), Sink()
    jobs = [Job(i, health="error") for i in range(40)]
    report = run(jobs, probe, sink, WindowPolicy(floor=2, start=16, cap=16, per_host=16))
    assert report.final == 2
    assert report.peak == 16
    # 16 -> 8 -> 4 -> 2: one halving per generation of work, not one per failure.
    assert report.shrinks == 3
    assert max(running for _, _, running in probe.starts[-10:]) <= 2
    assert report.health == {"error": 40}


@pytest.mark.parametrize("health", ["throttled", "slow"])
def test_throttled_and_slow_results_shrink_the_window(health):
    probe, sink = Probe(), Sink()
    jobs = [Job(i, health=health) for i in range(30)]
    report = run(jobs, probe, sink, WindowPolicy(floor=3, start=12, cap=12, per_host=12))
    assert report.final == 3
    assert report.shrinks >= 2


def test_clean_results_after_trouble_grow_the_window_back():
    probe, sink = Probe(), Sink()
    jobs = [Job(i, health="error") for i in range(8)] + [Job(100 + i) for i in range(60)]
    report = run(jobs, probe, sink, WindowPolicy(floor=1, start=8, cap=8, per_host=8, grow_after=2))
    assert report.shrinks >= 1
    assert report.final == 8


def test_cap_is_never_exceeded_and_floor_holds_the_minimum():
    probe, sink = Probe(), Sink()
    jobs = [Job(i, delay=0.002) for i in range(100)]
    report = run(
        jobs, probe, sink, WindowPolicy(floor=2, start=5, cap=5, per_host=10, grow_after=1)
    )
    assert probe.max_running == 5
    assert report.peak == 5

    probe, sink = Probe(), Sink()
    jobs = [Job(i, health="throttled", delay=0.002) for i in range(40)]
    report = run(jobs, probe, sink, WindowPolicy(floor=3, start=3, cap=10, per_host=10))
    assert report.final == 3
    # At the floor, failures do not starve the run: three still run at once.
    assert probe.max_running == 3


def test_per_host_limit_is_respected_while_other_hosts_use_the_rest():
    probe, sink = Probe(), Sink()
    jobs = [Job(i, host="a" if i % 3 else "b", delay=0.01) for i in range(60)]
    report = run(jobs, probe, sink, WindowPolicy(floor=1, start=6, cap=6, per_host=2))
    assert report.done == 60
    assert probe.max_per_host == {"a": 2, "b": 2}
    assert probe.max_running == 4


def test_soft_deadline_stops_new_starts_and_returns_unstarted_items_in_order():
    probe, sink = Probe(), Sink()
    jobs = [Job(i, delay=0.1) for i in range(20)]
    began = time.monotonic()
    deadline = began + 0.25
    report = run(
        jobs, probe, sink, WindowPolicy(floor=2, start=2, cap=2, per_host=2), soft_deadline=deadline
    )
    elapsed = time.monotonic() - began
    started = [job.name for _, job, _ in probe.starts]
    assert all(at < deadline for at, _, _ in probe.starts)
    assert 2 <= len(started) <= 8
    assert report.done == len(started)
    assert [job.name for job in report.unfinished] == list(range(len(started), 20))
    # In-flight work finished (not cancelled) and was flushed to the sink.
    assert probe.cancelled == []
    assert sorted(sink.received) == sorted(started)
    assert elapsed < 0.25 + 0.1 + 0.15


def test_a_deadline_already_passed_starts_nothing():
    probe, sink = Probe(), Sink()
    jobs = [Job(i) for i in range(5)]
    report = run(jobs, probe, sink, WindowPolicy(), soft_deadline=time.monotonic() - 1)
    assert report.done == 0
    assert report.unfinished == jobs
    assert probe.starts == [] and sink.batches == []


def test_rate_spaces_starts_per_host():
    probe, sink = Probe(), Sink()
    jobs = [Job(i, host="a" if i < 5 else "b", delay=0.0) for i in range(10)]
    run(jobs, probe, sink, WindowPolicy(start=8, cap=8, rate=20.0))  # one start per 50 ms
    for host in ("a", "b"):
        times = [at for at, job, _ in probe.starts if job.host == host]
        gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
        assert len(times) == 5
        assert min(gaps) >= 0.05 - SCHEDULING_SLACK
    # The hosts are spaced independently: b does not wait for a's schedule.
    first_b = min(at for at, job, _ in probe.starts if job.host == "b")
    assert first_b - probe.starts[0][0] < 0.05 - SCHEDULING_SLACK


def test_crawl_delay_spaces_starts_when_larger_than_the_rate():
    probe, sink = Probe(), Sink()
    jobs = [Job(i, delay=0.0) for i in range(4)]
    run(jobs, probe, sink, WindowPolicy(start=8, cap=8, rate=100.0, crawl_delay=0.08))
    times = [at for at, _, _ in probe.starts]
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) >= 0.08 - SCHEDULING_SLACK


def test_sink_gets_batches_in_arrival_order_serialised_and_the_last_partial_one():
    probe, sink = Probe(), Sink(delay=0.003)
    # Reverse delays so completion order differs from input order.
    jobs = [Job(i, delay=0.001 * (23 - i)) for i in range(23)]
    run(
        jobs,
        probe,
        sink,
        WindowPolicy(start=23, cap=23, per_host=23),
        batch_size=5,
        max_batch_wait=None,
    )
    assert [len(batch) for batch in sink.batches] == [5, 5, 5, 5, 3]
    assert sink.received == probe.finished
    assert sink.received != sorted(sink.received)
    assert not sink.overlapped


def test_partial_batch_goes_to_the_sink_when_it_has_waited_long_enough():
    probe = Probe()
    seen_at: list[float] = []

    async def sink(batch):
        seen_at.append(time.monotonic())

    jobs = [Job(0, delay=0.0), Job(1, delay=0.6)]
    began = time.monotonic()
    asyncio.run(
        run_window(
            jobs,
            probe.work,
            sink,
            policy=WindowPolicy(),
            host_of=lambda job: job.host,
            health_of=lambda job: job.health,
            soft_deadline=None,
            batch_size=50,
            max_batch_wait=0.1,
        )
    )
    # The quick result was handed over long before the slow one finished.
    assert len(seen_at) == 2
    assert seen_at[0] - began < 0.4


def test_slow_sink_applies_back_pressure_instead_of_buffering():
    probe = Probe()
    sunk = 0
    max_backlog = 0

    async def slow_sink(batch):
        nonlocal sunk, max_backlog
        max_backlog = max(max_backlog, len(probe.starts) - sunk)
        await asyncio.sleep(0.02)
        sunk += len(batch)

    jobs = [Job(i, delay=0.0) for i in range(200)]
    asyncio.run(
        run_window(
            jobs,
            probe.work,
            slow_sink,
            policy=WindowPolicy(start=4, cap=4, per_host=4),
            host_of=lambda job: job.host,
            health_of=lambda job: job.health,
            soft_deadline=None,
            batch_size=5,
            max_batch_wait=None,
        )
    )
    assert sunk == 200
    # Started-but-not-sunk stays within the queue (2 batches), the batch in the
    # sink, the batch being filled and the window: never the whole input.
    assert max_backlog <= 4 * 5 + 4


def test_an_old_partial_batch_waits_for_room_in_the_sink_queue_without_spinning(window_wakes):
    # The sink queue is full and a partial batch is older than max_batch_wait: the
    # scheduler must sleep until the sink takes a batch, not wake again at once.
    probe = Probe()
    sink = Sink(delay=0.3)
    # Seven quick results fill the queue (two batches of 2) and leave more behind
    # while a slow job keeps the window open.
    jobs = [Job(i, delay=0.0) for i in range(7)] + [Job(7, delay=0.8)]
    run(jobs, probe, sink, WindowPolicy(start=8, cap=8, per_host=8), batch_size=2, max_batch_wait=0.01)
    assert sorted(sink.received) == list(range(8))
    assert window_wakes[0] < 50  # a busy loop wakes thousands of times while the sink sleeps


def test_a_stuck_item_does_not_block_the_others():
    probe = Probe()
    sunk_before_stuck_done: list[int] = []
    received: list[int] = []

    async def sink(batch):
        received.extend(job.name for job in batch)
        if 0 not in probe.finished:
            sunk_before_stuck_done[:] = received

    jobs = [Job(0, delay=1.0)] + [Job(i, delay=0.01) for i in range(1, 41)]
    report = asyncio.run(
        run_window(
            jobs,
            probe.work,
            sink,
            policy=WindowPolicy(start=4, cap=4, per_host=4),
            host_of=lambda job: job.host,
            health_of=lambda job: job.health,
            soft_deadline=None,
            batch_size=10,
            max_batch_wait=0.05,
        )
    )
    assert report.done == 41
    assert sorted(sunk_before_stuck_done) == list(range(1, 41))
    assert received[-1] == 0


def test_sink_exception_propagates_after_cancelling_work_in_flight():
    probe, sink = Probe(), Sink(fail=True)
    jobs = [Job(0, delay=0.0)] + [Job(i, delay=5.0) for i in range(1, 4)]
    began = time.monotonic()
    with pytest.raises(ValueError, match="sink is broken"):
        run(jobs, probe, sink, WindowPolicy(start=4, cap=4), batch_size=1)
    assert time.monotonic() - began < 2.0
    assert sorted(probe.cancelled) == [1, 2, 3]
    assert probe.running == 0


def test_work_exception_propagates_after_handing_completed_results_to_the_sink():
    probe, sink = Probe(), Sink()
    jobs = [Job(0, delay=0.0), Job(1, delay=0.05, fail=True), Job(2, delay=5.0)]
    with pytest.raises(RuntimeError, match="bug in work for 1"):
        run(jobs, probe, sink, WindowPolicy(start=3, cap=3), batch_size=10)
    assert sink.received == [0]
    assert probe.cancelled == [2]


def test_outer_cancellation_cancels_work_in_flight():
    probe, sink = Probe(), Sink()

    async def main():
        task = asyncio.create_task(
            run_window(
                [Job(i, delay=5.0) for i in range(3)],
                probe.work,
                sink,
                policy=WindowPolicy(),
                host_of=lambda job: job.host,
                health_of=lambda job: job.health,
                soft_deadline=None,
            )
        )
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert sorted(probe.cancelled) == [0, 1, 2]


def test_empty_input_returns_at_once_without_calling_the_sink():
    probe, sink = Probe(), Sink()
    report = run([], probe, sink, WindowPolicy())
    assert report.done == 0 and report.unfinished == [] and sink.batches == []


def _result(**kwargs) -> FetchResult:
    return FetchResult(url="http://a/", final_url="http://a/", **kwargs)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (_result(status=200, elapsed=0.1, size=40_000), "ok"),
        (_result(status=404, elapsed=0.1), "ok"),
        (_result(status=429), "throttled"),
        (_result(status=503), "throttled"),
        (_result(error=FetchError.RATE_LIMITED), "throttled"),
        (_result(status=500), "error"),
        (_result(error=FetchError.READ_TIMEOUT), "error"),
        (_result(error=FetchError.DEADLINE_EXCEEDED), "error"),
        (_result(error=FetchError.CONNECT_FAILED), "error"),
        (_result(status=200, elapsed=2.5), "slow"),
        (_result(status=200, size=3_000_000), "slow"),
        (_result(error=FetchError.BLOCKED_BY_ROBOTS), "ok"),
        (_result(error=FetchError.SSRF_BLOCKED), "ok"),
    ],
)
def test_fetch_health_reads_load_signals_not_content_faults(result, expected):
    assert fetch_health(result, WindowPolicy()) == expected


@pytest.mark.parametrize(
    "kwargs",
    [{"floor": 0}, {"floor": 5, "cap": 4}, {"per_host": 0}, {"rate": 0.0}, {"crawl_delay": -1}],
)
def test_policy_refuses_impossible_settings(kwargs):
    with pytest.raises(ValueError):
        WindowPolicy(**kwargs)


# -- refill: more work handed in while the last items run -----------------------------------------


class Refill:
    """Hands out ``rounds`` lists of ``per`` new jobs, then []; records what the window held when asked."""

    def __init__(self, probe: Probe, rounds: int, per: int = 10, delay: float = 0.0, fail: bool = False):
        self.probe, self.rounds, self.per, self.delay, self.fail = probe, rounds, per, delay, fail
        self.calls = 0
        self.started_when_asked: list[int] = []
        self.active = False
        self.overlapped = False

    async def __call__(self) -> list[Job]:
        if self.active:
            self.overlapped = True
        self.active = True
        self.calls += 1
        self.started_when_asked.append(len(self.probe.starts))
        try:
            await asyncio.sleep(self.delay)
            if self.fail:
                raise LookupError("refill is broken")
            if self.calls > self.rounds:
                return []
            first = 1000 * self.calls
            return [Job(first + i) for i in range(self.per)]
        finally:
            self.active = False


def test_refill_is_asked_while_work_runs_and_what_it_gives_is_run_too():
    probe, sink = Probe(), Sink()
    refill = Refill(probe, rounds=3, per=10, delay=0.01)
    jobs = [Job(i) for i in range(10)]
    report = run(jobs, probe, sink, WindowPolicy(floor=1, start=4, cap=4, per_host=4), refill=refill)
    expected = list(range(10)) + [1000 * r + i for r in (1, 2, 3) for i in range(10)]
    assert sorted(sink.received) == sorted(expected)
    assert report.done == 40 and report.unfinished == []
    # Asked once per round and once more for the empty answer, never again after it,
    # one call at a time, and each time while work handed in before still waited
    # to start (so the window never ran dry waiting for it).
    assert refill.calls == 4 and not refill.overlapped
    handed_in = [10 + 10 * call for call in range(refill.calls)]
    assert all(started < handed for started, handed in zip(refill.started_when_asked, handed_in, strict=True))


def test_a_slow_refill_is_asked_early_enough_that_the_window_stops_running_dry():
    # 2 jobs of 10 ms in flight start ~200 jobs/s; a refill answers 100 ms after
    # it is asked, ~20 jobs' worth, while asking at two windows (4 waiting)
    # covers 20 ms. The lead grows from what each wait used until the answers
    # come while handed-in work still waits, then stays there.
    probe, sink = Probe(), Sink()
    answered: list[int] = []  # jobs started when each answer came

    class Timed(Refill):
        async def __call__(self):
            more = await super().__call__()
            answered.append(len(self.probe.starts))
            return more

    refill = Timed(probe, rounds=12, per=40, delay=0.1)
    jobs = [Job(i, delay=0.01) for i in range(40)]
    report = run(jobs, probe, sink, WindowPolicy(floor=1, start=2, cap=2, per_host=2), refill=refill)
    assert report.done == 40 * 13 and not refill.overlapped
    handed_in = [40 * (call + 1) for call in range(len(answered))]
    dry = [started >= handed for started, handed in zip(answered, handed_in, strict=True)]
    assert dry[0]  # the first answer came too late for a two-window lead
    # Later ones came in time (the last answer is the empty one); one stall of
    # a loaded machine's event loop may still leave a single one late.
    assert sum(dry[6:-1]) <= 1, dry


@pytest.mark.parametrize(("lead", "used", "expected"), [
    (4, 4, 8),          # the window ran dry: everything waiting was used, so double
    (32, 20, 40),       # in time: twice what the wait used
    (400, 10, 300),     # one quick answer takes a quarter off the lead, no more
    (4, 1, 4),          # never below two windows (window of 2)
    (400, 5000, REFILL_LEAD_MAX),  # never above the cap
])
def test_the_refill_lead_follows_what_the_last_wait_used(lead, used, expected):
    assert next_refill_lead(lead, used, 2) == expected


def test_the_refill_is_asked_by_twice_the_window_it_has_grown_to_not_the_one_it_started_with():
    probe, sink = Probe(), Sink()
    refill = Refill(probe, rounds=1, per=10, delay=0.01)
    jobs = [Job(i, delay=0.005) for i in range(60)]
    policy = WindowPolicy(floor=1, start=2, cap=8, per_host=8, grow_after=1)
    run(jobs, probe, sink, policy, refill=refill)
    asked_at = refill.started_when_asked[0]
    grown = max(running for _, _, running in probe.starts[:asked_at])
    assert grown > policy.start
    # Asked while more than two starting windows (4) waited, as two grown windows allow.
    assert len(jobs) - asked_at > 2 * policy.start


def test_an_empty_refill_while_much_still_waits_is_asked_once_more_near_the_end():
    # The audit's top-up can find nothing while its running URLs are about to
    # add more to the frontier: an early "no more" is checked again later.
    probe, sink = Probe(), Sink()
    # Three slow answers (0.2 s, ~40 jobs' worth at 2 x 10 ms) run the window
    # dry, so the lead doubles 4 -> 8 -> 16 -> 32; the fourth answer, quick and
    # empty, then comes with ~30 jobs still waiting.
    big = [[Job(1000 * r + i) for i in range(40)] for r in (1, 2, 3)]
    answers = [(0.2, big[0]), (0.2, big[1]), (0.2, big[2]), (0.002, []),
               (0.002, [Job(5000 + i) for i in range(5)]), (0.002, []), (0.002, [])]
    waiting_when_answered: list[int] = []
    handed_in = [20]

    async def refill():
        delay, more = answers[len(waiting_when_answered)]
        await asyncio.sleep(delay)
        waiting_when_answered.append(handed_in[0] - len(probe.starts))
        handed_in[0] += len(more)
        return more

    jobs = [Job(i, delay=0.01) for i in range(20)]
    run(jobs, probe, sink, WindowPolicy(floor=1, start=2, cap=2, per_host=2), refill=refill)
    assert sorted(sink.received) == sorted(
        list(range(20)) + [job.name for more in big for job in more] + [5000 + i for i in range(5)])
    # The early empty answer was asked again near the end, which gave five
    # more; the next empty answer, with at most two windows waiting, was final.
    assert len(waiting_when_answered) == 6
    assert waiting_when_answered[3] > 4 >= waiting_when_answered[5]


def test_refill_is_not_asked_past_the_soft_deadline_and_late_answers_come_back_unfinished():
    probe, sink = Probe(), Sink()
    refill = Refill(probe, rounds=5, per=10, delay=0.3)  # answers after the deadline
    jobs = [Job(i, delay=0.05) for i in range(6)]
    report = run(jobs, probe, sink, WindowPolicy(floor=1, start=2, cap=2, per_host=2), refill=refill,
                 soft_deadline=time.monotonic() + 0.1)
    assert refill.calls == 1
    assert sorted(job.name for job in report.unfinished) == sorted(
        [job.name for job in jobs if job.name not in sink.received] + [1000 + i for i in range(10)])
    assert not any(name >= 1000 for name in sink.received)


def test_a_failing_refill_stops_the_run_after_the_finished_results_reach_the_sink():
    probe, sink = Probe(), Sink()
    refill = Refill(probe, rounds=1, fail=True, delay=0.02)
    jobs = [Job(i, delay=0.01) for i in range(6)]
    with pytest.raises(LookupError):
        run(jobs, probe, sink, WindowPolicy(floor=1, start=2, cap=2, per_host=2), refill=refill)
    assert set(sink.received) <= set(range(6)) and sink.received  # what finished was kept
    assert probe.running == 0  # nothing left running


def test_sub_batches_fill_by_weight_when_results_weigh_differently():
    # Heavy results (weight 2, like parsed pages) and light ones (1, like checks):
    # a batch of weight 10 holds five heavy, ten light, or a mix.
    probe, sink = Probe(), Sink()
    jobs = [Job(i) for i in range(40)]
    weight = {i: 2 if i < 20 else 1 for i in range(40)}
    run(jobs, probe, sink, WindowPolicy(floor=1, start=1, cap=1, per_host=1), batch_size=10,
        max_batch_wait=None, weight_of=lambda job: weight[job.name])
    assert sink.received == list(range(40))
    assert [sum(weight[name] for name in batch) for batch in sink.batches] == [10, 10, 10, 10, 10, 10]
    assert [len(batch) for batch in sink.batches] == [5, 5, 5, 5, 10, 10]


def test_spaced_from_start_holds_each_hosts_first_start_a_spacing():
    # An audit's chunk follows the previous chunk's requests to the same host.
    probe, sink = Probe(), Sink()
    began = time.monotonic()
    run([Job(0), Job(1, host="b")], probe, sink, WindowPolicy(crawl_delay=0.15, spaced_from_start=True))
    assert all(at - began >= 0.14 for at, _, _ in probe.starts)
    probe = Probe()
    began = time.monotonic()
    run([Job(0)], probe, sink, WindowPolicy(crawl_delay=0.15))
    assert probe.starts[0][0] - began < 0.1


def test_a_chunk_shorter_than_the_spacing_waits_most_of_it_and_still_starts_one_item():
    probe, sink = Probe(), Sink()
    began = time.monotonic()
    report = run([Job(0), Job(1)], probe, sink, WindowPolicy(crawl_delay=5.0, spaced_from_start=True),
                 soft_deadline=began + 0.4)
    assert [job.name for _, job, _ in probe.starts] == [0] and len(report.unfinished) == 1
    assert 0.3 <= probe.starts[0][0] - began < 0.4 + SCHEDULING_SLACK

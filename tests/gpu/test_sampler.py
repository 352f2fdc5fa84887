"""The schedule: sample k at start + k·interval, without drift, skipping rather than bursting."""

from __future__ import annotations

import statistics
import threading
import time

import pytest

from ncompass.gpu._sampler import Sampler

MS = 1_000_000


class FakeTime:
    """A clock that only moves when the sampler waits or a reading takes time."""

    def __init__(self, read_ns: int) -> None:
        self.now = 0
        self.read_ns = read_ns

    def clock(self) -> int:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.now += round(seconds * 1e9)
        return False


def run_fake(interval_ns: int, read_ns: int, ticks: int) -> tuple[Sampler, list[tuple[int, int]]]:
    fake = FakeTime(read_ns)
    taken: list[tuple[int, int]] = []

    def take(tick: int) -> None:
        taken.append((tick, fake.now))
        fake.now += fake.read_ns
        if len(taken) == ticks:
            sampler.request_stop()

    sampler = Sampler(take, interval_ns, clock=fake.clock, wait=fake.wait)
    sampler.run(start_ns=0)
    return sampler, taken


def test_samples_land_exactly_on_the_grid_however_long_reads_take() -> None:
    sampler, taken = run_fake(interval_ns=10 * MS, read_ns=4 * MS, ticks=1000)
    assert taken == [(k, k * 10 * MS) for k in range(1000)]
    assert sampler.skipped_ticks == 0


def test_reads_longer_than_the_interval_skip_ticks_instead_of_bursting() -> None:
    sampler, taken = run_fake(interval_ns=10 * MS, read_ns=25 * MS, ticks=100)
    # a 25 ms reading overruns two ticks; the next sample waits for the third, on the grid
    assert taken == [(k, k * 10 * MS) for k in range(0, 300, 3)]
    assert sampler.skipped_ticks == 99 * 2


def test_a_read_ending_exactly_on_a_tick_takes_that_tick() -> None:
    _, taken = run_fake(interval_ns=10 * MS, read_ns=10 * MS, ticks=5)
    assert taken == [(k, k * 10 * MS) for k in range(5)]


def test_real_thread_keeps_to_the_grid_while_reads_take_time() -> None:
    interval_ns = 20 * MS
    taken: list[tuple[int, int]] = []
    done = threading.Event()

    def take(tick: int) -> None:
        taken.append((tick, time.perf_counter_ns()))
        time.sleep(0.005)  # a slow backend: a drifting schedule would fall 5 ms behind per tick
        if len(taken) == 40:
            done.set()

    sampler = Sampler(take, interval_ns)
    start_ns = time.perf_counter_ns()
    sampler.start(start_ns)
    assert done.wait(30)
    assert sampler.stop(5)
    lateness = [at - (start_ns + tick * interval_ns) for tick, at in taken[:40]]
    assert min(lateness) >= 0  # never early
    ticks = [tick for tick, _ in taken]
    assert ticks == sorted(set(ticks))
    # drift would make lateness grow by 5 ms a tick (to ~200 ms at the end); it stays bounded by
    # wake-up latency, which even a loaded machine keeps well under an interval most of the time
    assert statistics.median(lateness) < interval_ns
    assert min(lateness[-10:]) < 5 * interval_ns


def test_stop_wakes_a_sleeping_sampler_at_once() -> None:
    sampler = Sampler(lambda tick: None, interval_ns=3600 * 1_000 * MS)
    sampler.start(time.perf_counter_ns())
    time.sleep(0.01)
    started = time.monotonic()
    assert sampler.stop(10)
    assert time.monotonic() - started < 5
    assert sampler.thread is not None and not sampler.thread.is_alive()


def test_invalid_interval_and_double_start_are_refused() -> None:
    with pytest.raises(ValueError):
        Sampler(lambda tick: None, 0)
    sampler = Sampler(lambda tick: None, 10 * MS)
    sampler.start(time.perf_counter_ns())
    try:
        with pytest.raises(RuntimeError):
            sampler.start(time.perf_counter_ns())
    finally:
        sampler.stop(5)

"""The monitor samples at the rate asked for while the main thread runs Python.

Sampling reads the devices on a background thread, and every NVML call (through ctypes) lets go
of the GIL and takes it back: behind a main thread running Python each take used to wait the
interpreter's switch interval (5 ms), so 2 GPUs sampled every 50 ms were read about 8 times a
second.
The machine may itself be too busy to keep any thread on time, so a plain sleeping thread runs
alongside as the control: the monitor must keep within 10 % of the rate asked for, or of the
control's rate when the machine gives less.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from ncompass.gpu import GpuMonitor, GpuSample
from ncompass.gpu._backends import selection
from ncompass.gpu._backends.base import DeviceInfo
from ncompass.gpu._backends.nvml import NvmlBackend
from ncompass.gpu._summary import SummaryAccumulator

from .conftest import FakeGpu, FakeNvml

INTERVAL_S = 0.05
REGION_S = 2.0


def run_python(seconds: float) -> None:
    """Keep the main thread running Python bytecode (as a training loop's host code does)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        total = 0
        for value in range(2000):
            total += value * value


class Control(threading.Thread):
    """A plain thread waking at the same ticks: how often this machine lets a thread run."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stopping = threading.Event()
        self.wakes = 0
        self.seconds = 0.0

    def run(self) -> None:
        start = time.perf_counter()
        tick = 1
        while not self.stopping.wait(max(0.0, start + tick * INTERVAL_S - time.perf_counter())):
            self.wakes += 1
            tick = max(tick + 1, int((time.perf_counter() - start) / INTERVAL_S) + 1)
        self.seconds = time.perf_counter() - start


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    library = FakeNvml([FakeGpu() for _ in range(2)], releases_gil=True)
    monkeypatch.setitem(selection.DEFAULT_FACTORIES, "nvml", lambda: NvmlBackend(library))
    return library


def test_sampling_keeps_its_rate_while_the_main_thread_runs_python(two_gpus: FakeNvml) -> None:
    control = Control()
    control.start()
    with GpuMonitor(device="all", interval_s=INTERVAL_S, backend="nvml") as monitor:
        run_python(REGION_S)
    control.stopping.set()
    control.join()
    summary = monitor.summary
    assert summary is not None and summary.sample_rate_hz is not None
    asked = 1 / INTERVAL_S
    machine_gave = control.wakes / control.seconds
    expected = min(asked, machine_gave)
    assert summary.sample_rate_hz >= 0.9 * expected, (summary.sample_rate_hz, machine_gave)
    assert f"({summary.sample_rate_hz:.1f}/s of 20/s asked)" in summary.format()


def test_a_rate_short_of_the_one_asked_for_is_noted() -> None:
    accumulator = SummaryAccumulator(DeviceInfo(0, "NVIDIA A100"), window_start_ns=0)
    for tick in range(5):  # five samples over a second, 20 asked for
        accumulator.add(GpuSample(0, tick * 250_000_000, tick * 250_000_000, util_gpu=50))
    summary = accumulator.finish(backend="nvml", duration_s=1.0, warmup_s=0.0, interval_s=0.05)
    assert summary.sample_rate_hz == 4.0
    assert "sampled 4.0 times a second of the 20 asked for" in " ".join(summary.notes)
    assert "(4.0/s of 20/s asked)" in summary.format()


def test_the_switch_interval_is_put_back_when_the_last_monitor_stops() -> None:
    before = sys.getswitchinterval()
    with GpuMonitor(backend="cpu", interval_s=0.05):
        with GpuMonitor(backend="cpu", interval_s=0.05):
            assert sys.getswitchinterval() < 0.001
        assert sys.getswitchinterval() < 0.001  # the outer one still samples
    assert sys.getswitchinterval() == before

"""GpuMonitor: the seed's context manager, threads that end with their region, several devices."""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Sequence

import pytest

from ncompass.gpu import GpuBackendError, GpuMonitor, GpuSample, GpuSummary
from ncompass.gpu._backends import selection
from ncompass.gpu._backends.base import DeviceInfo
from ncompass.gpu._sampler import Sampler

from .conftest import FakeNvml, FakeSmi, smi_gpu

FAST = 0.01


def sampler_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "ncompass-gpu-sampler"]


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("backend", ["none", "cpu"])
def test_seed_context_manager_example(backend: str) -> None:
    with GpuMonitor(device=0, interval_s=FAST, backend=backend, sync_fn=lambda: None) as mon:
        busy(0.05)
    summary = mon.summary
    assert isinstance(summary, GpuSummary)
    assert summary.backend == backend and summary.duration_s >= 0.05
    assert mon.summaries == (summary,)
    assert summary.format()


def test_cpu_backend_sees_this_process_working() -> None:
    with GpuMonitor(interval_s=FAST, backend="cpu", keep_samples=True) as mon:
        busy(0.3)
    summary = mon.summary
    assert summary is not None and summary.device == -1
    assert summary.sample_count >= 2 and summary.util_gpu_max is not None
    assert summary.util_gpu_max > 0 and summary.memory_used_max_bytes
    assert len(mon.samples) == summary.sample_count + summary.missing_samples


def test_samples_are_kept_only_when_asked() -> None:
    with GpuMonitor(interval_s=FAST, backend="cpu") as mon:
        time.sleep(0.05)
    assert mon.samples == [] and mon.summary is not None and mon.summary.sample_count >= 2


def test_none_backend_starts_no_thread_and_samples_nothing() -> None:
    with GpuMonitor(backend="none", keep_samples=True) as mon:
        assert mon.sampler_thread is None
    assert mon.samples == [] and mon.summary is not None and mon.summary.sample_count == 0


def test_the_thread_runs_inside_the_region_and_is_gone_after_it() -> None:
    mon = GpuMonitor(interval_s=FAST, backend="cpu")
    with mon:
        thread = mon.sampler_thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive() and thread not in threading.enumerate()
    assert mon.sampler_thread is None and not mon.running


def test_the_thread_is_gone_when_the_region_raises_and_the_summary_is_still_made() -> None:
    mon = GpuMonitor(interval_s=FAST, backend="cpu", sync_fn=pytest.fail)
    with pytest.raises(KeyError), mon:
        thread = mon.sampler_thread
        raise KeyError("boom")
    assert thread is not None and not thread.is_alive()
    assert mon.summary is not None  # and sync_fn (pytest.fail) was not called


def test_sync_fn_runs_inside_the_region_before_it_closes() -> None:
    seen: list[bool] = []
    mon = GpuMonitor(interval_s=FAST, backend="cpu")

    def sync() -> None:
        thread = mon.sampler_thread
        seen.append(thread is not None and thread.is_alive())
        time.sleep(0.1)  # queued device work finishing

    mon.sync_fn = sync
    with mon:
        pass
    assert seen == [True]
    assert mon.summary is not None and mon.summary.duration_s >= 0.1


def test_a_failing_sync_fn_still_stops_the_thread() -> None:
    def sync() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    mon = GpuMonitor(interval_s=FAST, backend="cpu", sync_fn=sync)
    with pytest.raises(RuntimeError, match="illegal memory access"), mon:
        thread = mon.sampler_thread
    assert thread is not None and not thread.is_alive() and mon.summary is not None


class WarmupBackend:
    """Reads 100 % until ``warmup_s`` after it opened, 0 % after."""

    name = "scripted"

    def __init__(self, warmup_s: float) -> None:
        self.warmup_ns = int(warmup_s * 1e9)
        self.opened_ns = 0

    def open(self, devices: tuple[int, ...] | None, interval_s: float) -> Sequence[DeviceInfo]:
        self.opened_ns = time.perf_counter_ns()  # just before the monitor's region starts
        return [DeviceInfo(0, "scripted")]

    def read(self, time_ns: int, monotonic_ns: int) -> Sequence[GpuSample]:
        warm = monotonic_ns - self.opened_ns < self.warmup_ns
        return [GpuSample(0, time_ns, monotonic_ns, util_gpu=100.0 if warm else 0.0)]

    def close(self) -> None:
        pass

    def notes(self) -> Sequence[tuple[int | None, str]]:
        return []


def test_warmup_samples_are_kept_but_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(selection.DEFAULT_FACTORIES, "cpu", lambda: WarmupBackend(0.3))
    with GpuMonitor(interval_s=0.02, backend="cpu", warmup_s=0.3, keep_samples=True) as mon:
        time.sleep(0.5)
    summary = mon.summary
    assert summary is not None
    assert summary.util_gpu_max == 0.0  # every counted sample came after the warm-up
    assert summary.warmup_s == 0.3 and summary.measured_s == pytest.approx(summary.duration_s - 0.3)
    assert any(sample.util_gpu == 100.0 for sample in mon.samples)  # warm-up samples were kept
    assert summary.sample_count <= sum(sample.util_gpu == 0.0 for sample in mon.samples)


def test_several_devices_get_one_summary_each(fake_smi: FakeSmi) -> None:
    with GpuMonitor(device="all", interval_s=FAST, backend="smi", keep_samples=True) as mon:
        time.sleep(0.1)
    assert [summary.device for summary in mon.summaries] == [0, 1]
    assert mon.summary is mon.summaries[0]
    assert {sample.device for sample in mon.samples} == {0, 1}
    assert all(summary.sample_count >= 2 for summary in mon.summaries)


def test_a_device_list_keeps_its_order(fake_smi: FakeSmi) -> None:
    with GpuMonitor(device=[1, 0], interval_s=FAST, backend="smi") as mon:
        pass
    assert [summary.device for summary in mon.summaries] == [1, 0]


def test_a_lost_device_is_noted_in_its_summary_only(fake_smi: FakeSmi) -> None:
    fake_smi.configure(gpus=[smi_gpu(0), smi_gpu(1, lost_after=2)])
    with GpuMonitor(device="all", interval_s=FAST, backend="smi", keep_samples=True) as mon:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and all(s.has_data for s in list(mon.samples)):
            time.sleep(FAST)  # until the loss has been sampled
    first, second = mon.summaries
    assert second.missing_samples > 0 and first.missing_samples == 0
    assert "GPU disappeared from nvidia-smi's output" in second.notes
    assert "GPU disappeared from nvidia-smi's output" not in first.notes


def test_nested_monitors_are_independent() -> None:
    with GpuMonitor(interval_s=FAST, backend="cpu") as outer:
        time.sleep(0.03)
        with GpuMonitor(interval_s=FAST, backend="cpu") as inner:
            assert len(sampler_threads()) >= 2
            time.sleep(0.03)
        assert outer.running and not inner.running
        time.sleep(0.03)
    assert outer.summary is not None and inner.summary is not None
    assert outer.summary.duration_s > inner.summary.duration_s


def test_concurrent_monitors_in_threads_each_get_their_own_process(fake_smi: FakeSmi) -> None:
    summaries: list[GpuSummary | None] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with GpuMonitor(device=0, interval_s=FAST, backend="smi") as mon:
                time.sleep(0.1)
            summaries.append(mon.summary)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    workers = [threading.Thread(target=work) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert errors == [] and len(summaries) == 3
    assert all(summary is not None and summary.sample_count >= 2 for summary in summaries)
    assert len(fake_smi.loop_invocations()) == 3


def test_auto_uses_nvml_when_the_machine_has_it(fake_nvml_machine: FakeNvml) -> None:
    with GpuMonitor(device="all", interval_s=FAST) as mon:
        time.sleep(0.05)
    first, second = mon.summaries
    assert mon.backend_used == "nvml" and first.backend == "nvml"
    assert (first.name, second.name) == ("NVIDIA A100-SXM4-80GB", "NVIDIA L4")
    assert first.util_gpu_max == 100.0 and second.util_gpu_max == 10.0
    assert first.energy_j is not None and not first.energy_estimated
    assert fake_nvml_machine.initialised == 0


@pytest.mark.usefixtures("no_gpu_tools")
def test_strict_auto_without_a_gpu_raises_before_anything_runs() -> None:
    mon = GpuMonitor()
    with pytest.raises(GpuBackendError, match=r"nvml: .*\n  smi: nvidia-smi not found"):
        mon.start()
    assert not mon.running and sampler_threads() == []


@pytest.mark.usefixtures("no_gpu_tools")
def test_non_strict_auto_without_a_gpu_watches_the_cpu_and_says_so() -> None:
    warns = pytest.warns(RuntimeWarning, match="backend 'cpu' instead")
    with warns, GpuMonitor(strict=False, interval_s=FAST) as mon:
        time.sleep(0.03)
    assert mon.backend_used == "cpu" and mon.summary is not None
    assert mon.summary.backend == "cpu"
    assert any("backend 'cpu' instead" in note for note in mon.summary.notes)


@pytest.mark.usefixtures("no_gpu_tools")
def test_the_fallback_warning_points_at_the_users_line() -> None:
    from ncompass.gpu import gpu_profile

    @gpu_profile(strict=False, report=False)
    def step() -> None:
        pass

    with pytest.warns(RuntimeWarning) as warned:
        with GpuMonitor(strict=False, interval_s=FAST):
            line = _this_line() - 1
        step()
        call = _this_line() - 1
    assert [(w.filename, w.lineno) for w in warned] == [(__file__, line), (__file__, call)]


def _this_line() -> int:
    import sys

    return sys._getframe(1).f_lineno


@pytest.mark.usefixtures("no_gpu_tools")
def test_non_strict_explicit_smi_without_nvidia_smi_samples_nothing() -> None:
    with warnings.catch_warnings(record=True), GpuMonitor(backend="smi", strict=False) as mon:
        pass
    assert mon.backend_used == "none" and mon.summary is not None
    assert mon.summary.sample_count == 0


def test_a_monitor_can_run_again_but_not_twice_at_once() -> None:
    mon = GpuMonitor(interval_s=FAST, backend="cpu", keep_samples=True)
    with mon, pytest.raises(RuntimeError, match="already running"):
        mon.start()
    first = mon.summary
    with mon:
        pass
    assert mon.summary is not first
    with pytest.raises(RuntimeError, match="not running"):
        mon.stop()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"interval_s": 0}, "interval_s"),
        ({"warmup_s": -1}, "warmup_s"),
        ({"backend": "rocm"}, "backend must be one of"),
        ({"device": True}, "device"),
        ({"device": []}, "device"),
    ],
)
def test_bad_arguments_fail_at_construction(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GpuMonitor(**arguments)  # type: ignore[arg-type]


def test_a_sampler_that_cannot_start_leaves_no_nvidia_smi_behind(
    fake_smi: FakeSmi, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cannot_start(self: Sampler, start_ns: int) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(Sampler, "start", cannot_start)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        GpuMonitor(backend="smi").start()
    (loop,) = fake_smi.loop_invocations()
    with pytest.raises(ProcessLookupError):
        os.kill(loop["pid"], 0)

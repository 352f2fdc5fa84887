"""The cpu backend, for real: this process tree's CPU time and memory from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ncompass.gpu._backends.cpu import CpuBackend
from ncompass.gpu._sample import HOST_DEVICE, GpuSample

linux_only = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")

# Burns CPU for a fixed amount of *CPU* time (not wall time, which a loaded machine stretches),
# reports it, then (optionally) stays alive until its stdin closes.
BURN = """
import os, sys
start = os.times()
while (lambda t: t.user + t.system)(os.times()) - (start.user + start.system) < {cpu_s}:
    pass
t = os.times()
print(t.user + t.system, flush=True)
sys.stdin.read()
"""
TICK_S = 0.01
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def read(backend: CpuBackend) -> GpuSample:
    (sample,) = backend.read(time.time_ns(), time.perf_counter_ns())
    return sample


def cpu_seconds_between(first: GpuSample, second: GpuSample) -> float:
    assert second.util_gpu is not None
    return second.util_gpu / 100 * CORES * (second.monotonic_ns - first.monotonic_ns) / 1e9


def burn(cpu_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", BURN.format(cpu_s=cpu_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


@linux_only
def test_opens_one_host_device_with_the_host_memory_size() -> None:
    (info,) = CpuBackend().open((0,), 0.2)
    assert info.index == HOST_DEVICE
    assert info.name.startswith("host CPU")
    with open("/proc/meminfo") as meminfo:
        total_kib = int(meminfo.readline().split()[1])
    assert info.memory_total_bytes == total_kib * 1024


@linux_only
def test_first_reading_has_memory_but_no_utilisation_yet() -> None:
    backend = CpuBackend()
    backend.open(None, 0.2)
    sample = read(backend)
    assert sample.util_gpu is None
    with open("/proc/self/statm") as statm:
        own_rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    assert sample.memory_used_bytes is not None and sample.memory_used_bytes >= own_rss * 0.9


@linux_only
def test_a_running_child_counts_in_the_tree() -> None:
    backend = CpuBackend()
    backend.open(None, 0.2)
    first = read(backend)
    child = burn(0.3)
    try:
        assert child.stdout is not None
        child_cpu_s = float(child.stdout.readline())  # it has burnt its CPU and is still alive
        second = read(backend)
    finally:
        child.communicate("")
    measured = cpu_seconds_between(first, second)
    # tick granularity on both sides plus this process's own (small) CPU use
    assert child_cpu_s - 3 * TICK_S <= measured <= child_cpu_s + 0.15


@linux_only
def test_a_reaped_child_still_counts_through_its_parent() -> None:
    backend = CpuBackend()
    backend.open(None, 0.2)
    first = read(backend)
    child = burn(0.2)
    output, _ = child.communicate("")
    second = read(backend)
    measured = cpu_seconds_between(first, second)
    assert float(output) - 3 * TICK_S <= measured <= float(output) + 0.15


@linux_only
def test_without_children_files_the_tree_is_found_by_scanning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_children_files(self: CpuBackend, pid: int) -> list[int]:
        raise FileNotFoundError

    monkeypatch.setattr(CpuBackend, "_children_from_tasks", no_children_files)
    backend = CpuBackend()
    backend.open(None, 0.2)
    first = read(backend)
    child = burn(0.2)
    try:
        assert child.stdout is not None
        child_cpu_s = float(child.stdout.readline())
        second = read(backend)
    finally:
        child.communicate("")
    assert cpu_seconds_between(first, second) >= child_cpu_s - 3 * TICK_S


def test_without_proc_it_degrades_to_os_times_and_says_so(tmp_path: os.PathLike[str]) -> None:
    backend = CpuBackend(proc=str(tmp_path / "no-proc"))
    (info,) = backend.open(None, 0.2)
    assert info.memory_total_bytes is None
    read(backend)
    time.sleep(0.02)
    sample = read(backend)
    assert sample.util_gpu is not None and sample.memory_used_bytes is None
    assert any("no /proc here" in text for _, text in backend.notes())


def test_a_device_index_is_noted_as_ignored() -> None:
    backend = CpuBackend()
    backend.open((1,), 0.2)
    assert (HOST_DEVICE, "the cpu backend watches the host; device= is ignored") in backend.notes()

"""What the GPU monitor's sampler costs at the default 0.2 s interval, side by side, in one run.

    python benchmarks/bench_gpu_monitor.py [--seconds S] [--rounds N] [--interval S] [--quick]

The monitored region does nothing (the main thread sleeps), so every CPU second the process
spends is the monitor's. Cases, interleaved over rounds so machine noise hits all alike:

- ``no monitor``: the baseline;
- ``none``: a monitor with sampling disabled (no thread);
- ``cpu``: the host-CPU backend reading /proc for this process tree;
- ``smi``: one long-running fake ``nvidia-smi -lms`` child; the reader thread and sampler are
  this process's cost; the fake's own CPU is shown apart (it is a Python script, so it says
  nothing about the real nvidia-smi);
- ``nvml``: the NVML backend over an in-process fake library returning pynvml's structures
  (Python cost only; a real driver call adds its own time);
- ``peer: smi per sample``: the naive way, one ``nvidia-smi --query-gpu`` process per sample.

Cost = (process CPU time with the case - baseline) / region length, as a percent of one core.
Goal: under 1 % at 0.2 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from ncompass.gpu import GpuMonitor
from ncompass.gpu._backends import selection
from ncompass.gpu._backends.nvml import NvmlBackend

GOAL_PERCENT = 1.0

FAKE_NVIDIA_SMI = """\
import sys, time
args = sys.argv[1:]
fields = next(a for a in args if a.startswith("--query-gpu=")).split("=", 1)[1].split(",")
values = {"index": "0", "name": "NVIDIA H100 80GB HBM3", "utilization.gpu": "97",
          "utilization.memory": "41", "memory.used": "31245", "memory.total": "81559",
          "power.draw": "612.30", "temperature.gpu": "67"}
line = ", ".join(values[f] for f in fields)
period = int(args[args.index("-lms") + 1]) / 1000 if "-lms" in args else None
while True:
    print(line, flush=True)
    if period is None:
        break
    time.sleep(period)
"""


class FakePynvml:
    """Just enough of pynvml for the nvml backend, returning pynvml's own structures."""

    def __init__(self) -> None:
        import pynvml

        self.pynvml = pynvml
        self.NVMLError = pynvml.NVMLError
        self.energy_mj = 0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return self.pynvml.c_nvmlDevice_t()

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        return self.pynvml.c_nvmlUtilization_t(gpu=97, memory=41)

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        return self.pynvml.c_nvmlMemory_t(total=80 * 2**30, free=50 * 2**30, used=30 * 2**30)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return 612_300

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        return 67

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        self.energy_mj += 120_000
        return self.energy_mj


@contextmanager
def fake_nvidia_smi_on_path() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "nvidia-smi"
        script.write_text(f"#!{sys.executable}\n{FAKE_NVIDIA_SMI}")
        script.chmod(0o755)
        saved = os.environ["PATH"]
        os.environ["PATH"] = f"{folder}{os.pathsep}{saved}"
        try:
            yield str(script)
        finally:
            os.environ["PATH"] = saved


@contextmanager
def smi_per_sample(interval_s: float) -> Iterator[None]:
    """The peer: a thread spawning ``nvidia-smi --query-gpu`` once per sample."""
    command = [shutil.which("nvidia-smi") or "nvidia-smi", "--query-gpu=index,utilization.gpu"]
    stop = threading.Event()

    def loop() -> None:
        start = time.perf_counter()
        tick = 0
        while not stop.wait(max(0.0, start + tick * interval_s - time.perf_counter())):
            subprocess.run([*command, "--format=csv,noheader,nounits"], capture_output=True)
            tick += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    region: Callable[[], AbstractContextManager[Any]], seconds: float
) -> tuple[float, float]:
    """(this process's CPU seconds, reaped children's CPU seconds) over one idle region."""
    own, children = time.process_time(), children_cpu_s()
    with region():
        time.sleep(seconds)
    return time.process_time() - own, children_cpu_s() - children


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each region")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--interval", type=float, default=0.2, help="sampling period")
    parser.add_argument("--quick", action="store_true", help="2 s regions, 1 round")
    options = parser.parse_args()
    seconds, rounds = (2.0, 1) if options.quick else (options.seconds, options.rounds)
    interval = options.interval
    library = FakePynvml()
    selection.DEFAULT_FACTORIES["nvml"] = lambda: NvmlBackend(library)

    def monitor(backend: str) -> Callable[[], AbstractContextManager[Any]]:
        return lambda: GpuMonitor(interval_s=interval, backend=backend)

    cases: dict[str, Callable[[], AbstractContextManager[Any]]] = {
        "no monitor": nullcontext,
        "none": monitor("none"),
        "cpu": monitor("cpu"),
        "smi (long-running child)": monitor("smi"),
        "nvml (fake library)": monitor("nvml"),
        "peer: smi per sample": lambda: smi_per_sample(interval),
    }
    own: dict[str, list[float]] = {name: [] for name in cases}
    children: dict[str, list[float]] = {name: [] for name in cases}
    with fake_nvidia_smi_on_path():
        for _ in range(rounds):
            for name, region in cases.items():
                own_s, children_s = measure(region, seconds)
                own[name].append(own_s)
                children[name].append(children_s)
    baseline = statistics.median(own["no monitor"])
    samples = seconds / interval
    print(
        f"GPU monitor sampler cost: {seconds:g} s idle regions, interval {interval:g} s, "
        f"{rounds} round(s), median; {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print(f"{'case':<27}{'process CPU':>12}{'% of a core':>13}{'µs/sample':>11}{'children':>11}")
    for name in cases:
        cpu = statistics.median(own[name]) - baseline
        percent = cpu / seconds * 100
        per_sample = cpu / samples * 1e6 if name != "no monitor" else 0.0
        child = statistics.median(children[name]) / seconds * 100
        print(f"{name:<27}{cpu * 1e3:>9.1f} ms{percent:>12.3f}%{per_sample:>11.0f}{child:>10.2f}%")
    worst = max(
        (statistics.median(own[name]) - baseline) / seconds * 100
        for name in ("cpu", "smi (long-running child)", "nvml (fake library)")
    )
    print(
        f"worst ncompass backend: {worst:.3f}% of one core = {worst / GOAL_PERCENT:.2f}x the "
        f"{GOAL_PERCENT:g}% goal ({'met' if worst < GOAL_PERCENT else 'MISSED'})"
    )
    print("children: CPU of reaped child processes (the fake nvidia-smi), % of one core")


if __name__ == "__main__":
    main()

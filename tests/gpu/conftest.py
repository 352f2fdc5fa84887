"""Fakes for what this machine lacks: NVML (no driver) and nvidia-smi (no GPU).

Both sit behind the interface the real thing has: ``FakeNvml`` has pynvml's function names and
returns pynvml's own structures and errors; ``FakeSmi`` is an executable named ``nvidia-smi``
first on PATH that prints nvidia-smi's CSV format.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml
import pytest

from ncompass.gpu._backends import selection


@dataclass
class FakeGpu:
    """One scripted device: a reading per call, cycling."""

    name: str = "NVIDIA A100-SXM4-80GB"
    util: list[int] = field(default_factory=lambda: [50])
    memory_util: int = 20
    memory_used: int = 8 * 1024**3
    memory_total: int = 80 * 1024**3
    power_mw: int | None = 250_000
    temperature: int = 60
    energy_step_mj: int | None = 50_000  # added to the counter at every read
    lost_after_reads: int | None = None
    reads: int = 0
    energy_mj: int = 1_000_000


class FakeNvml:
    """pynvml's names, return types and errors over scripted devices."""

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST

    def __init__(
        self, gpus: list[FakeGpu], init_error: int | None = None, *, releases_gil: bool = False
    ) -> None:
        self.gpus = gpus
        self.init_error = init_error
        # pynvml calls the library through ctypes, which lets go of the GIL for every call
        self.releases_gil = releases_gil
        self.initialised = 0
        self.calls: dict[str, int] = {}
        self._handles: dict[int, FakeGpu] = {}
        self._alive: list[Any] = []

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _gpu(self, handle: Any) -> FakeGpu:
        if self.releases_gil:
            time.sleep(0)  # lets go of the GIL and takes it back, as a ctypes call does
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        gpu = self._handles[id(handle)]
        if gpu.lost_after_reads is not None and gpu.reads >= gpu.lost_after_reads:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlInit(self) -> None:
        self._count("nvmlInit")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._count("nvmlShutdown")
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        if index >= len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        handle = pynvml.c_nvmlDevice_t()
        self._handles[id(handle)] = self.gpus[index]
        self._alive.append(handle)  # ids stay unique while the handles live
        return handle

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        self._count("nvmlDeviceGetUtilizationRates")
        gpu = self._gpu(handle)
        util = gpu.util[gpu.reads % len(gpu.util)]
        gpu.reads += 1
        return pynvml.c_nvmlUtilization_t(gpu=util, memory=gpu.memory_util)

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        gpu = self._gpu(handle)
        free = gpu.memory_total - gpu.memory_used
        return pynvml.c_nvmlMemory_t(total=gpu.memory_total, free=free, used=gpu.memory_used)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        self._count("nvmlDeviceGetPowerUsage")
        gpu = self._gpu(handle)
        if gpu.power_mw is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.power_mw

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(handle).temperature

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        gpu = self._gpu(handle)
        if gpu.energy_step_mj is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        gpu.energy_mj += gpu.energy_step_mj
        return gpu.energy_mj


class FakeSmi:
    """A fake ``nvidia-smi`` first on PATH; ``configure`` sets what it prints."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.log = bin_dir / "nvidia-smi.log"

    def configure(self, **scenario: Any) -> FakeSmi:
        (self.bin_dir / "nvidia-smi.json").write_text(json.dumps(scenario))
        return self

    def invocations(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def loop_invocations(self) -> list[dict[str, Any]]:
        return [call for call in self.invocations() if "-lms" in call["argv"]]


def smi_gpu(index: int, **overrides: Any) -> dict[str, Any]:
    """A GPU entry for ``FakeSmi.configure(gpus=[...])``."""
    return {
        "index": index,
        "name": f"NVIDIA H100 80GB HBM3 #{index}",
        "memory.total": 81559,
        **overrides,
    }


def install_fake_smi(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSmi:
    """Writes a fake nvidia-smi with two idle GPUs into ``bin_dir`` and puts it first on PATH."""
    bin_dir.mkdir()
    source = (Path(__file__).parent / "fake_nvidia_smi.py").read_text()
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!{sys.executable}\n{source}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return FakeSmi(bin_dir).configure(gpus=[smi_gpu(0), smi_gpu(1)])


def hide_gpu_tools(empty_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaves only an empty folder on PATH, so there is no nvidia-smi."""
    empty_dir.mkdir()
    monkeypatch.setenv("PATH", str(empty_dir))


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSmi:
    """A fake nvidia-smi with two idle GPUs, first on PATH."""
    return install_fake_smi(tmp_path / "bin", monkeypatch)


@pytest.fixture
def no_gpu_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without nvidia-smi (this machine has no NVML either)."""
    hide_gpu_tools(tmp_path / "empty-bin", monkeypatch)


@pytest.fixture
def fake_nvml_machine(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """Makes backend "nvml" (and so "auto") use a FakeNvml with two GPUs."""
    from ncompass.gpu._backends.nvml import NvmlBackend

    library = FakeNvml([FakeGpu(util=[90, 100]), FakeGpu(name="NVIDIA L4", util=[10])])
    monkeypatch.setitem(selection.DEFAULT_FACTORIES, "nvml", lambda: NvmlBackend(library))
    return library

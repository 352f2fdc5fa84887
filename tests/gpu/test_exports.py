"""The public surface of ncompass.gpu, and that importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import ncompass.gpu
from ncompass.errors import NcompassError


def test_exported_members() -> None:
    assert ncompass.gpu.__all__ == [
        "DeviceSpec",
        "GpuBackendError",
        "GpuMonitor",
        "GpuSample",
        "GpuSummary",
        "ProfiledResult",
        "gpu_profile",
    ]
    assert issubclass(ncompass.gpu.GpuBackendError, NcompassError)


def test_importing_the_monitor_imports_neither_torch_nor_pynvml() -> None:
    code = (
        "import sys, ncompass.gpu, ncompass.gpu.timeline, ncompass.cli._monitor; "
        "print(sorted(m for m in ('torch', 'pynvml') if m in sys.modules))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert output.stdout.strip() == "[]"

"""The public surface: what ``ncompass`` and the seed paths export, and what importing costs."""

from __future__ import annotations

import subprocess
import sys

import ncompass

PUBLIC = [
    "CaptureError",
    "ContextError",
    "GpuBackendError",
    "GpuMonitor",
    "GpuSample",
    "GpuSummary",
    "NcompassError",
    "ProfiledResult",
    "ProfilingSession",
    "RewriteConfig",
    "RewriteError",
    "SpecError",
    "TraceError",
    "__version__",
    "capture_trace",
    "disable_rewrites",
    "enable_full_trace_mode",
    "enable_rewrites",
    "gpu_profile",
]


def test_public_names_are_pinned() -> None:
    assert sorted(ncompass.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(ncompass, name) is not None


def test_seed_import_paths() -> None:
    from ncompass.trace import (
        RewriteConfig,
        disable_rewrites,
        enable_full_trace_mode,
        enable_rewrites,
    )
    from ncompass.trace.core import RewriteConfig as CoreConfig
    from ncompass.trace.profile.nvtx import NvtxContext
    from ncompass.trace.profile.torch import TorchProfilerContext, TorchRecordContext

    assert RewriteConfig is CoreConfig is ncompass.RewriteConfig
    assert (
        callable(enable_rewrites)
        and callable(disable_rewrites)
        and callable(enable_full_trace_mode)
    )
    assert NvtxContext and TorchProfilerContext and TorchRecordContext


def test_importing_ncompass_stays_light() -> None:
    code = (
        "import sys, ncompass, ncompass.trace.profile.torch, ncompass.runtime.sites\n"
        "heavy = [m for m in ('torch', 'libcst', 'pydantic', 'rich', 'numpy') if m in sys.modules]\n"
        "print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

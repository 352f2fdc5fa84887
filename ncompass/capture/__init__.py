"""Profiler lifecycle (torch profiler, nvtx, none), ``capture_trace`` and trace file naming.

The surface is below; each name loads its module (and torch, for the profiler) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports

if TYPE_CHECKING:
    from ncompass.capture.compiled_kernels import CompiledKernel
    from ncompass.capture.decorator import capture_trace, profiling_enabled
    from ncompass.capture.kernel_markers import attribute_kernels
    from ncompass.capture.lifecycle import ProfiledRun, profiled
    from ncompass.capture.run_options import RunOptions, RunResult, load_specs, run_command
    from ncompass.capture.runner import run
    from ncompass.capture.sidecar import Sidecar, read_sidecar
    from ncompass.capture.trace_files import claim_trace_path, sidecar_path, trace_dir

# public name -> module that defines it (imported on first use: most need torch)
_LAZY: dict[str, str] = {
    "ProfiledRun": "ncompass.capture.lifecycle",
    "profiled": "ncompass.capture.lifecycle",
    "RunOptions": "ncompass.capture.run_options",
    "RunResult": "ncompass.capture.run_options",
    "load_specs": "ncompass.capture.run_options",
    "run_command": "ncompass.capture.run_options",
    "run": "ncompass.capture.runner",
    "capture_trace": "ncompass.capture.decorator",
    "profiling_enabled": "ncompass.capture.decorator",
    "claim_trace_path": "ncompass.capture.trace_files",
    "sidecar_path": "ncompass.capture.trace_files",
    "trace_dir": "ncompass.capture.trace_files",
    "Sidecar": "ncompass.capture.sidecar",
    "read_sidecar": "ncompass.capture.sidecar",
    "CompiledKernel": "ncompass.capture.compiled_kernels",
    "attribute_kernels": "ncompass.capture.kernel_markers",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "CompiledKernel",
    "ProfiledRun",
    "RunOptions",
    "RunResult",
    "Sidecar",
    "attribute_kernels",
    "capture_trace",
    "claim_trace_path",
    "load_specs",
    "profiled",
    "profiling_enabled",
    "read_sidecar",
    "run",
    "run_command",
    "sidecar_path",
    "trace_dir",
]

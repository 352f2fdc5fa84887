"""The factory ``ncompass run`` uses, and the base class of every backend (:mod:`.backend`)."""

from __future__ import annotations

from pathlib import Path

from ncompass.capture.backends.backend import ProfilerBackend
from ncompass.capture.backends.kinds import PROFILERS, kind_of


def make_profiler(
    name: str,
    output_path: Path,
    *,
    record_shapes: bool = False,
    profile_memory: bool = False,
    with_stack: bool = False,
) -> ProfilerBackend:
    """The backend for ``--profiler name``.

    Raises:
        CaptureError: unknown profiler name.
    """
    if name == "torch":
        from ncompass.capture.backends.torch import TorchProfiler

        return TorchProfiler(
            output_path,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
        )
    if name == "nvtx":
        from ncompass.capture.backends.nvtx import NvtxProfiler

        return NvtxProfiler()
    if name == "nvtx-trace":
        from ncompass.capture.backends.nvtx_trace import NvtxTraceProfiler

        return NvtxTraceProfiler(output_path)
    kind_of(name)  # raises for an unknown name
    from ncompass.capture.backends.none import NoProfiler

    return NoProfiler()


__all__ = ["PROFILERS", "ProfilerBackend", "make_profiler"]

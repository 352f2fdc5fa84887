"""The protocol every profiler backend implements, and the factory ``ncompass run`` uses."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ncompass.capture.backends.kinds import PROFILERS, kind_of


class ProfilerBackend(Protocol):
    """Starts and stops one capture of a run.

    Attributes:
        name: The ``--profiler`` value.
        marker_context: The range context whose markers this profiler records; specs that
            do not choose a context get this one.
    """

    name: str
    marker_context: str

    def start(self) -> None:
        """Begin recording."""

    def stop(self) -> Path | None:
        """End recording and write the trace; return its path (None if nothing is written here)."""


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

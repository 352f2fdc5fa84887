"""``--profiler none``: rewrites only, nothing recorded (markers still run their contexts)."""

from __future__ import annotations

from pathlib import Path

from ncompass.capture.backends.backend import ProfilerBackend


class NoProfiler(ProfilerBackend):
    """A profiler that records nothing."""

    name = "none"
    marker_context = "torch"

    def start(self) -> None:
        """Nothing to start."""

    def stop(self) -> Path | None:
        """Nothing was written."""
        return None


__all__ = ["NoProfiler"]

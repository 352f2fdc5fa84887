"""Profiler backends: one module per profiler, behind the small protocol in :mod:`.base`."""

from __future__ import annotations

from ncompass.capture.backends.base import PROFILERS, ProfilerBackend, make_profiler

__all__ = ["PROFILERS", "ProfilerBackend", "make_profiler"]

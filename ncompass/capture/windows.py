"""Cut a window out of a written trace: the events during one ``capture_trace`` call.

Nested ``capture_trace`` calls (and calls inside ``ncompass run``) cannot start a second torch
profiler, so they record a uniquely named range instead; once the outer trace is written, each
window becomes a trace of its own (see :mod:`ncompass.traces.windows`, which streams it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ncompass.errors import CaptureError, TraceError
from ncompass.traces.windows import WindowCut
from ncompass.traces.windows import write_windows as cut_windows


class Window(Protocol):
    """What the torch backend records per nested call (its ``TraceWindow``)."""

    @property
    def marker(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def output_path(self) -> Path: ...


def write_windows(trace_path: Path, windows: Sequence[Window]) -> list[Path]:
    """Write one trace per window, cut from the trace at ``trace_path``.

    Raises:
        CaptureError: the trace just written cannot be read back, or a window not written.
    """
    cuts = [WindowCut(window.marker, window.title, window.output_path) for window in windows]
    try:
        return cut_windows(trace_path, cuts)
    except TraceError as error:
        raise CaptureError(f"cannot cut windows from the trace just written: {error}") from None


__all__ = ["write_windows"]

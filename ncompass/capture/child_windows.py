"""The parent's side of recording windows in a re-executed run (``nvtx-trace``, ``--nsys``).

The child claimed ``<trace>-wN.json`` and wrote its sidecar as each window closed; once it has
exited, the tool's recording holds the windows only. The parent writes each window's trace
from it (:meth:`write_window_traces` of the capture), names the real profiler and the exit
code in each window's sidecar, and leaves no whole-run trace, as under ``--profiler torch``:
the whole-run claim and sidecar are removed, and so are windows the tool did not record.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ncompass.capture.sidecar import update_sidecar
from ncompass.capture.trace_files import release_claim
from ncompass.run_files import TRACE_SUFFIX, sidecar_path, trace_stem, window_number, window_stem

if TYPE_CHECKING:
    from ncompass.capture.gpu_timeline import GpuTimeline
    from ncompass.capture.sidecar import SidecarExtras
    from ncompass.gpu import GpuMonitor


class WindowCapture(Protocol):
    """What records the child's windows (:class:`RecorderCapture`, :class:`NsysCapture`)."""

    name: str

    def write_window_traces(self, trace_path: Path) -> tuple[str, list[Path]]:
        """Write each window's trace; a line saying what was recorded, and the traces."""

    def sidecar_extras(self, trace_path: Path | None = None) -> SidecarExtras:
        """Keys added to a window's sidecar."""


def finish_windows(
    capture: WindowCapture,
    trace_path: Path,
    exit_code: int,
    monitor: GpuMonitor | None = None,
) -> tuple[list[Path], GpuTimeline | None]:
    """Write the windows' traces after the child exited; returns them and the GPU samples.

    Raises:
        TraceError: the recording cannot be read or a window's trace written.
    """
    note, written = capture.write_window_traces(trace_path)
    print(f"ncompass: {note}", file=sys.stderr)
    for claimed in _claimed_windows(trace_path):
        if claimed not in written:  # opened, but the tool recorded nothing for it
            release_claim(claimed)
            if not claimed.exists():
                sidecar_path(claimed).unlink(missing_ok=True)
    spans = []
    for trace in written:
        document = _complete_sidecar(capture, trace, exit_code)
        if document is not None and "started_unix_s" in document:
            start = float(document["started_unix_s"])
            spans.append((trace, start, start + float(document.get("duration_s", 0.0))))
    sidecar_path(trace_path).unlink(missing_ok=True)  # no whole-run trace: no sidecar for it
    release_claim(trace_path)
    gpu = None
    if monitor is not None:
        from ncompass.capture.gpu_timeline import finish

        gpu = finish(monitor, None, windows=spans)
    return written, gpu


def _claimed_windows(trace_path: Path) -> list[Path]:
    stem = trace_stem(trace_path)
    pattern = window_stem(stem, 0)[:-1] + "*" + TRACE_SUFFIX
    return [path for path in trace_path.parent.glob(pattern) if window_number(stem, path)]


def _complete_sidecar(capture: WindowCapture, trace: Path, exit_code: int) -> dict[str, Any] | None:
    """Name the real profiler and the exit code in a window's sidecar; returns it."""
    changes = {"profiler": capture.name, "exit_code": exit_code, **capture.sidecar_extras(trace)}
    updated = update_sidecar(trace, changes)
    return dict(updated) if updated is not None else None


__all__ = ["WindowCapture", "finish_windows"]

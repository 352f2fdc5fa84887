"""Recording windows under ``--nsys``: nsys records only while the CUDA profiler API says so.

``nsys profile`` is started with ``--capture-range=cudaProfilerApi`` and
``--capture-range-end=stop`` (one window: by marker without ``--repeat``, or by time) or
``repeat`` (``--repeat``, ``--on-demand``: nsys then writes one report per capture range,
``NAME.1.nsys-rep``, ``NAME.2.nsys-rep``, ...). In the child, each window calls
``cudaProfilerStart`` when it opens and ``cudaProfilerStop`` when it closes, through torch, and
only where CUDA is initialised: a process that never initialised CUDA cannot reach the CUDA
profiler, so nsys captures nothing for that window. The child lists the windows that did start
a capture in a file (``NCOMPASS_NSYS_WINDOWS``); the parent pairs the k-th report with the k-th
window listed, renames it ``<trace>-wN.nsys-rep`` and converts it to ``<trace>-wN.json``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ncompass import environment_variables
from ncompass.run_files import window_stem, window_trace

if TYPE_CHECKING:
    from ncompass.capture.triggers import RecordingWindowOptions

WINDOWS_FILE_VARIABLE = environment_variables.NCOMPASS_NSYS_WINDOWS
"""The file the child appends the number of each window that started a capture to."""

_CAPTURE_RANGE_OPTIONS = ("-c", "--capture-range", "--capture-range-end")

_capturing = False


def cuda_is_initialised() -> bool:
    """Whether this process has initialised CUDA through torch (never imports torch)."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def start_cuda_capture(number: int) -> bool:
    """``cudaProfilerStart`` for window ``number`` where CUDA is initialised; whether it ran.

    Under ``--nsys`` the window's number is then listed for the parent.
    """
    global _capturing
    if not cuda_is_initialised():
        return False
    import torch.cuda.profiler as cuda_profiler

    cuda_profiler.start()
    _capturing = True
    listing = os.environ.get(WINDOWS_FILE_VARIABLE)
    if listing:
        with open(listing, "a", encoding="utf-8") as started:
            started.write(f"{number}\n")
    return True


def stop_cuda_capture() -> None:
    """``cudaProfilerStop``, if this process started a capture."""
    global _capturing
    if not _capturing:
        return
    _capturing = False
    import torch.cuda.profiler as cuda_profiler

    cuda_profiler.stop()


def one_window(windows: RecordingWindowOptions) -> bool:
    """Whether ``windows`` can open only once (so nsys may stop at the first range's end)."""
    if windows.on_demand:
        return False
    return windows.marker is None or windows.repeat == 1


def capture_range_options(windows: RecordingWindowOptions) -> list[str]:
    """The ``nsys profile`` options that record only the windows."""
    end = "stop" if one_window(windows) else "repeat"
    return ["--capture-range=cudaProfilerApi", f"--capture-range-end={end}"]


def sets_capture_range(arguments: list[str]) -> bool:
    """Whether the user's ``--nsys-args`` choose a capture range themselves."""
    return any(
        argument == name or argument.startswith(f"{name}=")
        for argument in arguments
        for name in _CAPTURE_RANGE_OPTIONS
    )


def started_windows(listing: Path) -> list[int]:
    """The windows that started a capture, in order (from the child's listing)."""
    try:
        return [int(line) for line in listing.read_text().split()]
    except (OSError, ValueError):
        return []


def range_reports(report: Path, single: bool) -> list[Path]:
    """The reports nsys wrote, one per capture range, in order (``report`` is NAME.nsys-rep)."""
    if single:
        return [report] if report.is_file() else []
    stem = report.name[: -len(".nsys-rep")]
    found: list[tuple[int, Path]] = []
    for path in report.parent.glob(f"{stem}.*.nsys-rep"):
        index = path.name[len(stem) + 1 : -len(".nsys-rep")]
        if index.isdigit():
            found.append((int(index), path))
    return [path for _, path in sorted(found)]


@dataclass(frozen=True)
class NsysWindow:
    """One window's report, renamed beside its trace (``<trace>-wN.nsys-rep``)."""

    number: int
    report: Path
    trace: Path


def pair_reports(
    report: Path, single: bool, listing: Path, trace_path: Path
) -> tuple[list[NsysWindow], str | None]:
    """Pair nsys' reports with the windows that started them; rename each report after its
    window's trace. Returns the pairs and a line to show when something did not pair.
    """
    reports = range_reports(report, single)
    numbers = started_windows(listing)
    stem = trace_path.name.removesuffix(".json")
    pairs: list[NsysWindow] = []
    for number, path in zip(numbers, reports, strict=False):
        trace = window_trace(trace_path, number)
        renamed = trace.with_name(f"{window_stem(stem, number)}.nsys-rep")
        path.replace(renamed)
        pairs.append(NsysWindow(number, renamed, trace))
    note = None
    if not numbers:
        note = (
            "nsys captured no window: CUDA was not initialised when any window opened, so "
            "cudaProfilerStart never ran (windows under --nsys are nsys' cudaProfilerApi "
            "capture ranges); no window trace written"
        )
    elif len(reports) != len(numbers):
        note = (
            f"nsys wrote {len(reports)} report(s) for {len(numbers)} window(s) that started a "
            "capture; the first ones were paired in order"
        )
    return pairs, note


__all__ = [
    "WINDOWS_FILE_VARIABLE",
    "NsysWindow",
    "capture_range_options",
    "cuda_is_initialised",
    "one_window",
    "pair_reports",
    "range_reports",
    "sets_capture_range",
    "start_cuda_capture",
    "started_windows",
    "stop_cuda_capture",
]

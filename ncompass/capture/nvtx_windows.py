"""Recording windows under ``--profiler nvtx-trace``: the NVTX recorder keeps nothing outside them.

The gate lives in the recorder itself (``nvtx_recorder.c``). The parent starts the child with
``NCOMPASS_NVTX_WINDOWS`` set, so the recorder starts closed; in the child, each window's
:class:`~ncompass.capture.recording_windows.NvtxWindowRange` flips the recorder's window number
through ctypes (:func:`open_recorder_window`, :func:`close_recorder_window`), on the library
NVTX already loaded (``dlopen`` of the same file returns the same copy). Flipping a flag was
chosen over the recorder recognising the window's range by name: no string compare on every
push, and it works for by-marker, by-time and on-demand windows alike. Outside a window an
NVTX call into the recorder reads the flag and counts push/pop depth: no clock read, no memory.
ncompass' own markers do not even call NVTX outside a window
(:func:`ncompass.runtime.nvtx_range.record_markers`): they cost an idle marker and a flag
check; other libraries' NVTX ranges (torch's, CUDA's) meet the recorder's gate.

Each process the run follows opens and closes its own recorder's gate, counting its own marker
calls (:mod:`ncompass.capture.follow.windows`, with an ``NvtxWindowRange`` in place of a
torch profiler). Only ranges that start inside a window are kept (as under the torch profiler); a
range still open at the window's close ends at the close. After the child exited, the parent
writes window N of every process's recording as ``<trace>-wN.json``
(:func:`write_recorded_windows`), one track per process; there is no whole-run trace, as with
``--profiler torch``.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ncompass import environment_variables
from ncompass.capture.trace_files import claim_trace_path
from ncompass.run_files import window_trace

if TYPE_CHECKING:
    from ncompass.capture.nvtx_recorder.records import NvtxRange, NvtxRecording

WINDOWS_VARIABLE = environment_variables.NCOMPASS_NVTX_WINDOWS
"""Set in the child's environment: the recorder records inside windows only."""

WINDOW_RANGE_PREFIX = "ncompass.recording-window#"
"""The NVTX range that marks window N is this prefix followed by N."""


class RecorderGate:
    """The recorder's window switch in this process (the library NVTX loaded).

    Args:
        library: The recorder's shared library (``NVTX_INJECTION64_PATH``).
    """

    def __init__(self, library: str) -> None:
        self._library = ctypes.CDLL(library)
        self._window = self._library.ncompass_nvtx_recorder_window
        self._window.argtypes = [ctypes.c_uint32]
        self._window.restype = ctypes.c_uint32
        self._events = self._library.ncompass_nvtx_recorder_events
        self._events.argtypes = []
        self._events.restype = ctypes.c_uint64
        self.number = 0
        """The open window's number (0: none is open)."""

    def open(self, number: int) -> None:
        """Record from now on, as window ``number``."""
        self._window(number)
        self.number = number

    def close(self) -> None:
        """Record nothing from now on."""
        self._window(0)
        self.number = 0

    def events(self) -> int:
        """Events the recorder has kept in this process so far."""
        return int(self._events())


_gate: RecorderGate | None = None
_looked_up = False


def write_recorder_output() -> None:
    """Have the recorder attached to this process write its recording now (a process leaving
    through ``os._exit``, as ``multiprocessing`` children do, runs no exit handler)."""
    library = os.environ.get(environment_variables.NVTX_INJECTION64_PATH)
    if not library:
        return
    try:
        write = ctypes.CDLL(library).ncompass_nvtx_recorder_write
    except (OSError, AttributeError):
        return  # another NVTX tool (nsys): it keeps its own recording
    write.argtypes = []
    write.restype = None
    write()


def recorder_gate() -> RecorderGate | None:
    """The gate of the recorder attached to this process with windows, else None (no
    recorder, a recorder recording the whole run, or another NVTX tool such as nsys)."""
    global _gate, _looked_up
    if not _looked_up:
        _looked_up = True
        library = os.environ.get(environment_variables.NVTX_INJECTION64_PATH)
        if library and os.environ.get(WINDOWS_VARIABLE):
            try:
                _gate = RecorderGate(library)
            except (OSError, AttributeError):
                _gate = None  # not the recorder after all: nothing to gate
    return _gate


def open_recorder_window(number: int) -> None:
    """Open the recorder's window ``number`` (before the window's range is pushed), and let
    ncompass' markers reach NVTX."""
    gate = recorder_gate()
    if gate is not None:
        gate.open(number)
    if os.environ.get(WINDOWS_VARIABLE):
        from ncompass.runtime.nvtx_range import record_markers

        record_markers(True)


def close_recorder_window() -> None:
    """Close the recorder's window (after the window's range is popped); markers skip NVTX."""
    if os.environ.get(WINDOWS_VARIABLE):
        from ncompass.runtime.nvtx_range import record_markers

        record_markers(False)
    gate = recorder_gate()
    if gate is not None:
        gate.close()


def write_recorded_windows(
    recordings: list[NvtxRecording],
    trace_path: Path,
    write: Callable[[list[NvtxRecording], Path], object],
) -> list[Path]:
    """Write each window of the gated recordings as ``<trace>-wN.json``.

    A window's trace is the empty ``<trace>-wN.json`` the child claimed when the window
    opened, or, for a window only followed processes opened, a new file of that name (a
    non-empty file of that name is another run's and is left alone). Every process that
    recorded window N (the run's own and each followed one, which opens its own windows) is
    one track of it, cut by its own window's range: ranges that started inside it are kept;
    those still open at its close end there. The window's own range is named ``recording window N``.

    Args:
        recordings: The gated recordings (one per process).
        trace_path: The run's trace name (``NAME.json``); windows go beside it.
        write: Writes recordings as one Chrome trace (the backend's writer).

    Raises:
        TraceError: a window's trace cannot be written.
    """
    parts: dict[int, list[NvtxRecording]] = {}
    for recording in recordings:  # each process is cut by its own window's range
        for window in _window_ranges(recording):
            number = int(window.name[len(WINDOW_RANGE_PREFIX) :])
            end = window.end_ns if window.end_ns is not None else recording.written_monotonic_ns
            parts.setdefault(number, []).append(_inside(recording, window.start_ns, end, number))
    written: list[Path] = []
    for number in sorted(parts):
        output = window_trace(trace_path, number)
        if not output.exists():  # only followed processes opened it: written all the same
            output = claim_trace_path(trace_path.parent, output.stem, exact=True)
        elif output.stat().st_size:
            continue  # not claimed by this run (a trace of an earlier one): left alone
        write(parts[number], output)
        written.append(output)
    return written


def _window_ranges(recording: NvtxRecording) -> list[NvtxRange]:
    return [r for r in recording.ranges if r.name.startswith(WINDOW_RANGE_PREFIX)]


def _inside(recording: NvtxRecording, start: int, end: int, number: int) -> NvtxRecording:
    """The part of ``recording`` that window ``number`` (``start``..``end``) holds."""
    ranges = []
    for nvtx_range in recording.ranges:
        if not start <= nvtx_range.start_ns <= end:
            continue
        if nvtx_range.name.startswith(WINDOW_RANGE_PREFIX):
            if nvtx_range.name != f"{WINDOW_RANGE_PREFIX}{number}":
                continue
            nvtx_range = dataclasses.replace(nvtx_range, name=f"recording window {number}")
        if nvtx_range.end_ns is None or nvtx_range.end_ns > end:  # open at the close: ends there
            nvtx_range = dataclasses.replace(
                nvtx_range, end_ns=end, end_tid=nvtx_range.end_tid or nvtx_range.tid
            )
        ranges.append(nvtx_range)
    marks = [mark for mark in recording.marks if start <= mark.time_ns <= end]
    return dataclasses.replace(recording, ranges=ranges, marks=marks)


__all__ = [
    "WINDOWS_VARIABLE",
    "RecorderGate",
    "close_recorder_window",
    "open_recorder_window",
    "recorder_gate",
    "write_recorded_windows",
]

"""``--profiler nvtx-trace``: NVTX ranges recorded by ncompass' own injection library.

NVTX reads ``NVTX_INJECTION64_PATH`` once, at a process's first NVTX call, so the recorder
cannot attach to the process that is already running ``ncompass run``. The run is executed
again in a child process with the recorder attached (see :mod:`ncompass.capture.child_run`):

- in the child, :class:`NvtxTraceProfiler` is the backend: markers are NVTX ranges and every
  NVTX range of the process (any library, any domain) goes to the recorder;
- in the parent, :class:`RecorderCapture` builds the recorder (once, into the user's cache),
  gives the child its environment, and after the child exited turns the recordings into a
  Chrome trace whose timestamps are wall-clock time, like the PyTorch profiler's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncompass import environment_variables
from ncompass.capture.backends.backend import ProfilerBackend
from ncompass.errors import CaptureError

if TYPE_CHECKING:
    from ncompass.capture.nvtx_recorder.records import NvtxRecording
    from ncompass.capture.sidecar import SidecarExtras

INJECTION_ENV = environment_variables.NVTX_INJECTION64_PATH


class NvtxTraceProfiler(ProfilerBackend):
    """The backend inside the re-executed run: an NVTX tool attached by the parent records.

    Args:
        output_path: Where the parent will write the trace (the run's sidecar goes beside it).
    """

    name = "nvtx-trace"
    marker_context = "nvtx"

    def __init__(self, output_path: Path) -> None:
        self.output_path = output_path

    def start(self) -> None:
        """Check that an NVTX tool is attached.

        Raises:
            CaptureError: None is (the run was not started by ``ncompass run``).
        """
        if not os.environ.get(INJECTION_ENV):
            raise CaptureError(
                f"--profiler nvtx-trace: no NVTX tool is attached ({INJECTION_ENV} is unset); "
                "start the run with `ncompass run --profiler nvtx-trace ...`, which attaches "
                "the recorder to a child process"
            )

    def stop(self) -> Path | None:
        """Nothing to stop: the tool writes when the process exits, then the parent converts."""
        return None if self.output_path == Path(os.devnull) else self.output_path


@dataclass
class RecorderCapture:
    """The parent's side: the recorder attached to the child, its output turned into a trace.

    Attributes:
        library: The built recorder.
        recordings: The folder the child's processes write their recordings to.
    """

    library: Path
    recordings: Path
    name: str = "nvtx-trace"
    windows: bool = False

    @classmethod
    def create(cls, scratch: Path, *, windows: bool = False) -> RecorderCapture:
        """Build the recorder if needed; recordings go to ``scratch``; with ``windows`` the
        recorder keeps only what the child's recording windows hold.

        Raises:
            CaptureError: No C compiler, or the build failed (the message says what to do).
        """
        from ncompass.capture.nvtx_recorder import build_recorder

        return cls(build_recorder(), scratch / "nvtx", windows=windows)

    def command(self, child: list[str]) -> list[str]:
        """The child's command line: unchanged."""
        return child

    def environment(self) -> dict[str, str]:
        """``NVTX_INJECTION64_PATH`` and the recorder's output for the child (and, with
        windows, the variable that starts the recorder closed)."""
        from ncompass.capture.nvtx_recorder import environment
        from ncompass.capture.nvtx_windows import WINDOWS_VARIABLE

        variables = environment(self.recordings, library=self.library)
        if self.windows:
            variables[WINDOWS_VARIABLE] = "1"
        return variables

    def write_trace(self, trace_path: Path) -> str:
        """Write the child's recordings as a Chrome trace; returns a line saying what it holds.

        Raises:
            TraceError: A recording cannot be read.
        """
        recordings = self._recordings()
        write_recordings(recordings, trace_path)
        ranges = sum(len(recording.ranges) for recording in recordings)
        marks = sum(len(recording.marks) for recording in recordings)
        note = (
            f"NVTX recorder: {_count(ranges, 'range')} and {_count(marks, 'mark')} from "
            f"{_count(len(recordings), 'process', 'es')}"
        )
        if not ranges and not marks:
            note += " (nothing used NVTX: do the markers run, and is `nvtx` installed?)"
        dropped = sum(recording.dropped_events for recording in recordings)
        if dropped:
            note += f"; {dropped} events dropped past NCOMPASS_NVTX_MAX_EVENTS"
        return note

    def write_window_traces(self, trace_path: Path) -> tuple[str, list[Path]]:
        """Write each recording window as ``<trace>-wN.json`` (no whole-run trace); returns a
        line saying what was recorded, and the windows written.

        Raises:
            TraceError: A recording cannot be read.
        """
        from ncompass.capture.nvtx_windows import write_recorded_windows

        recordings = self._recordings()
        windows = write_recorded_windows(recordings, trace_path, write_recordings)
        ranges = sum(len(recording.ranges) for recording in recordings)
        note = (
            f"NVTX recorder: {_count(ranges, 'range')} recorded in "
            f"{_count(len(windows), 'window')}, nothing outside them"
        )
        dropped = sum(recording.dropped_events for recording in recordings)
        if dropped:
            note += f"; {dropped} events dropped past NCOMPASS_NVTX_MAX_EVENTS"
        return note, windows

    def _recordings(self) -> list[NvtxRecording]:
        from ncompass.capture.nvtx_recorder import read_recordings

        return read_recordings(self.recordings) if self.recordings.is_dir() else []

    def sidecar_extras(self, trace_path: Path | None = None) -> SidecarExtras:
        """Nothing beyond the usual sidecar (for the run's trace or a window's)."""
        return {}


def write_recordings(recordings: list[NvtxRecording], trace_path: Path) -> None:
    """Write recordings as one Chrome trace, on the wall clock like the PyTorch profiler's."""
    from ncompass.capture.nvtx_recorder import to_chrome_events
    from ncompass.traces.nsys.layout import spread_overlapping_slices
    from ncompass.traces.writer import TraceWriter

    events = to_chrome_events(recordings)
    spread_overlapping_slices(events)  # ranges of two domains may interleave on a thread
    metadata: dict[str, Any] = {"schemaVersion": 1, "displayTimeUnit": "ms"}
    if recordings:
        base_ns = _to_wall_clock(events, recordings[0].to_realtime_ns(0))
        metadata["baseTimeNanoseconds"] = base_ns
    dropped = sum(recording.dropped_events for recording in recordings)
    metadata["otherData"] = {"source": "ncompass NVTX recorder", "dropped_events": dropped}
    with TraceWriter(trace_path, metadata=metadata) as writer:
        writer.write_many(events)


def _count(number: int, noun: str, plural: str = "s") -> str:
    return f"{number} {noun}{'' if number == 1 else plural}"


def _to_wall_clock(events: list[dict[str, Any]], monotonic_to_wall_ns: int) -> int:
    """Move ``CLOCK_MONOTONIC`` timestamps onto the wall clock, relative to a base time.

    As in PyTorch profiler traces, ``ts`` becomes microseconds since ``baseTimeNanoseconds``
    (returned): the run then lines up with other traces of the machine (``ncompass merge``)
    and with GPU-monitor samples, and keeps its nanoseconds.
    """
    stamps: list[int] = [round(float(event["ts"]) * 1000) for event in events if "ts" in event]
    if not stamps:
        return 0
    base_ns = (min(stamps) + monotonic_to_wall_ns) // 1000 * 1000
    for event in events:
        if "ts" in event:
            wall_ns = round(float(event["ts"]) * 1000) + monotonic_to_wall_ns
            event["ts"] = (wall_ns - base_ns) / 1000.0
    return base_ns


__all__ = ["INJECTION_ENV", "NvtxTraceProfiler", "RecorderCapture", "write_recordings"]

"""A run's recording windows: one profiler, one trace and one sidecar per span.

:func:`~ncompass.capture.lifecycle.profiled` hands the run to a :class:`RecordingWindows`
instead of starting its profiler: a trigger (:mod:`ncompass.capture.triggers`) opens and closes
spans, and each span gets a fresh backend from ``make_profiler``, a trace claimed as
``<trace>-w1``, ``<trace>-w2``, ... and, through ``on_written``, its sidecar. Outside a span no
profiler records, so nothing is buffered however long the run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ncompass.capture.backends.backend import ProfilerBackend
from ncompass.capture.backends.kinds import WINDOW_PROFILERS, kind_of
from ncompass.capture.spans import Trigger, WindowRecord
from ncompass.capture.termination import stops_go_to_the_main_thread
from ncompass.capture.trace_files import claim_trace_path
from ncompass.capture.triggers import RecordingWindowOptions
from ncompass.errors import CaptureError
from ncompass.run_files import TRACE_SUFFIX, window_stem

if TYPE_CHECKING:
    from ncompass.spec.models import RewriteConfig


@dataclass
class RecordedSpan:
    """One span whose trace is written.

    Attributes:
        window: What opened it (the sidecar's ``window``).
        trace: The trace file.
        backend: The profiler that recorded it.
        started_unix_s / duration_s: When it opened, and for how long it recorded.
    """

    window: WindowRecord
    trace: Path
    backend: ProfilerBackend
    started_unix_s: float
    duration_s: float


@dataclass
class _OpenSpan:
    window: WindowRecord
    trace: Path
    backend: ProfilerBackend
    started_unix_s: float
    clock: float


class RecordingWindows:
    """The spans of one run, opened and closed by one trigger.

    Args:
        trigger: What opens and closes spans.
        make_backend: A fresh profiler writing to the given trace path, for span number N.
        folder / name: Where traces go and the run's trace name (spans add ``-wN``).
        on_written: Called with each span once its trace is written (writes its sidecar).
        marks_only: The run's own profiler is an NVTX tool (attached, or the NVTX recorder);
            each span marks itself with an NVTX range (see :class:`NvtxWindowRange`). With
            ``claims_traces``, its trace ``<trace>-wN`` is claimed for the parent run to write
            from the tool's recording (``nvtx-trace``, ``--nsys``:
            :mod:`ncompass.capture.child_windows`).
    """

    def __init__(
        self,
        trigger: Trigger,
        make_backend: Callable[[Path, int], ProfilerBackend],
        folder: Path,
        name: str,
        on_written: Callable[[RecordedSpan], object] | None = None,
        *,
        marks_only: bool = False,
        claims_traces: bool = True,
    ) -> None:
        self.trigger = trigger
        self.marks_only = marks_only
        self._claims_traces = claims_traces
        self.spans: list[RecordedSpan] = []
        self.warning: str | None = None
        self._make_backend = make_backend
        self._folder = folder
        self._name = name
        self._on_written = on_written
        self._lock = threading.RLock()
        self._prepared: tuple[ProfilerBackend, Path] | None = None
        self._open: _OpenSpan | None = None
        self._prepare_after_close = False
        self._ended = False

    def begin(self) -> None:
        """Hand the run to the trigger (before the profiled code runs)."""
        self.trigger.install(self)

    def end(self) -> None:
        """Close the open span (writing its trace) and stop the trigger; however the run ended.

        The span is closed first, so Ctrl-C or the program's end inside a window still writes
        that window's trace. :attr:`warning` says when no window opened.
        """
        with self._lock:
            self._ended = True
            try:
                self._close()
            finally:
                self._discard_prepared()
        self.warning = self.trigger.uninstall()

    def prepare(self) -> None:
        """Start the next span's profiler up, so its start-up is not in the window."""
        with self._lock:
            if self._ended or self._prepared is not None:
                return
            if self._open is not None:  # one profiler at a time: prepare once this span ends
                self._prepare_after_close = True
                return
            number = len(self.spans) + 1
            trace = self._folder / f"{window_stem(self._name, number)}{TRACE_SUFFIX}"
            if self._claims_traces:
                trace = claim_trace_path(self._folder, window_stem(self._name, number))
            backend = self._make_backend(trace, number)
            self._prepared = (backend, trace)
            try:
                backend.prepare()
            except BaseException:
                self._discard_prepared()
                raise

    def open(self, record: WindowRecord) -> bool:
        """Begin recording a span; False when one is open (or the run is ending)."""
        with self._lock:
            if self._ended or self._open is not None:
                return False
            with stops_go_to_the_main_thread():  # the profiler's threads never take SIGTERM
                if self._prepared is None:
                    self.prepare()
                assert self._prepared is not None
                backend, trace = self._prepared
                self._prepared = None
                window: WindowRecord = {**record, "number": len(self.spans) + 1}
                started = time.time()
                backend.start()
            self._open = _OpenSpan(window, trace, backend, started, time.perf_counter())
            return True

    def close(self) -> Path | None:
        """End the open span and write its trace; returns its path (None: no span open)."""
        with self._lock:
            written = self._close()
            if self._prepare_after_close and not self._ended:
                self._prepare_after_close = False
                with stops_go_to_the_main_thread():
                    self.prepare()
            return written

    def time_spans(self) -> list[tuple[Path, float, float]]:
        """Each written span's trace with when it started and ended (wall clock, seconds)."""
        return [
            (span.trace, span.started_unix_s, span.started_unix_s + span.duration_s)
            for span in self.spans
        ]

    def drop_after_fork(self) -> Trigger:
        """In a forked child: end this copy of the parent's windows without writing anything
        (the parent writes its own spans); returns the trigger, for the child to adopt
        (:meth:`~ncompass.capture.spans.Trigger.adopt_after_fork`)."""
        with self._lock:
            span, self._open = self._open, None
            prepared, self._prepared = self._prepared, None
            self._ended = True
        for backend in (span.backend if span else None, prepared[0] if prepared else None):
            discard = getattr(backend, "stop_and_discard", None)
            if discard is not None:
                with contextlib.suppress(Exception):  # a prepared profiler was never started
                    discard()
        if self.marks_only and span is not None:  # the parent's NVTX window: not this one's
            from ncompass.capture.nvtx_windows import close_recorder_window

            close_recorder_window()
        return self.trigger

    @property
    def recording(self) -> WindowRecord | None:
        """The window of the open span, if one is open."""
        span = self._open
        return None if span is None else span.window

    def _close(self) -> Path | None:
        span, self._open = self._open, None
        if span is None:
            return None
        duration = time.perf_counter() - span.clock
        written = span.backend.stop()
        if written is None and not self.marks_only:
            raise CaptureError(f"the profiler wrote no trace for window {span.window['number']}")
        trace = written or span.trace  # marks only: the parent run writes it (nvtx-trace)
        recorded = RecordedSpan(span.window, trace, span.backend, span.started_unix_s, duration)
        self.spans.append(recorded)
        if self._on_written is not None and self._claims_traces:
            self._on_written(recorded)
        return trace

    def _discard_prepared(self) -> None:
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return
        _, trace = prepared  # a prepared torch profiler records nothing: dropping it is enough
        try:
            if trace.stat().st_size == 0:
                trace.unlink()
        except OSError:
            pass


def check_window_marker(marker: str, config: RewriteConfig) -> None:
    """Refuse a ``--window`` marker that no marker of the spec can be called.

    A marker's name is its ``name:`` or, without one, ``<module or file>:<qualname>...``, so a
    name starting with a target's module or file followed by ``:`` is accepted too.

    Raises:
        CaptureError: naming the spec's marker names.
    """
    names: list[str] = []
    labels: list[str] = []
    for target in config.targets:
        labels.append(target.label)
        for marker_specs in (target.functions, target.calls, target.ranges):
            names.extend(m.name for m in marker_specs if m.name is not None)
    if marker in names or any(marker.startswith(f"{label}:") for label in labels):
        return
    known = ", ".join(sorted(set(names))) or "none named"
    raise CaptureError(
        f"--window: no marker named {marker!r} in the spec; its marker names: {known} "
        "(or MODULE:QUALNAME for a marker without a name)"
    )


def windows_for_run(
    options: RecordingWindowOptions,
    profiler: str,
    config: RewriteConfig,
    folder: Path,
    name: str,
    make_backend: Callable[[Path, int], ProfilerBackend],
    on_written: Callable[[RecordedSpan], object] | None = None,
) -> RecordingWindows:
    """The recording windows of one ``ncompass run`` process.

    Raises:
        CaptureError: the profiler records nothing (``none``) or cannot record windows, or the
            ``--window`` marker is not in the spec.
    """
    kind = kind_of(profiler)
    if not kind.records_windows:
        raise CaptureError(
            f"recording windows need a profiler that records: --profiler {profiler} cannot "
            f"(use {' or '.join(WINDOW_PROFILERS)})"
        )
    if options.marker is not None:
        check_window_marker(options.marker, config)

    def control() -> Path:
        from ncompass.capture.control_folder import create_control_folder

        pid = os.getpid()
        folder = create_control_folder(pid)
        print(  # the line the user needs to capture later: the run's pid
            f"ncompass: run {pid} records on demand: ncompass capture {pid} [--duration SECONDS]",
            file=sys.stderr,
            flush=True,
        )
        return folder

    trigger = options.trigger(control)
    if kind.window_is_profiler:
        return RecordingWindows(trigger, make_backend, folder, name, on_written)
    return RecordingWindows(
        trigger,
        lambda trace, number: NvtxWindowRange(window_range_name(number), number),
        folder,
        name,
        on_written,
        marks_only=True,
        claims_traces=kind.cuts_window_traces,  # the parent writes them from the recording
    )


def window_range_name(number: int) -> str:
    """The NVTX range that marks span ``number`` when NVTX records the whole run."""
    return f"ncompass.recording-window#{number}"


class NvtxWindowRange(ProfilerBackend):
    """A span under ``--profiler nvtx`` or ``nvtx-trace``: an NVTX range around the window,
    and ``cudaProfilerStart``/``Stop`` where CUDA is initialised, so that
    ``nsys profile --capture-range=cudaProfilerApi`` records the same window. Under
    ``nvtx-trace`` it also opens and closes the recorder's window
    (:mod:`ncompass.capture.nvtx_windows`)."""

    name = "nvtx"
    marker_context = "nvtx"

    def __init__(self, range_name: str, number: int = 0) -> None:
        from ncompass.runtime.sites import bind

        self._enter, self._exit = bind("nvtx", range_name, async_safe=True)
        self._handle: object = None
        self._number = number

    def prepare(self) -> None:
        """Load the recorder's gate before the window opens (once per process)."""
        from ncompass.capture.nvtx_windows import recorder_gate

        recorder_gate()

    def start(self) -> None:
        """Open the recorder's window, the range and the CUDA profiler capture."""
        from ncompass.capture.nsys_windows import start_cuda_capture
        from ncompass.capture.nvtx_windows import open_recorder_window

        open_recorder_window(self._number)
        self._handle = self._enter()
        start_cuda_capture(self._number)

    def stop(self) -> Path | None:
        """Close them; the run's recording holds the window."""
        from ncompass.capture.nsys_windows import stop_cuda_capture
        from ncompass.capture.nvtx_windows import close_recorder_window

        stop_cuda_capture()
        self._exit(self._handle)
        close_recorder_window()
        return None


"""The ``--profiler`` values recording windows work with."""


__all__ = [
    "WINDOW_PROFILERS",
    "RecordedSpan",
    "RecordingWindows",
    "check_window_marker",
    "windows_for_run",
]

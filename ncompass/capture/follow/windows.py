"""Recording windows in every process of a followed run: each process records its own part.

A run with windows (``--window``, ``--delay``/``--duration``, ``--on-demand``) puts its window
choice in the settings its children read (:func:`window_settings`). Each followed process then
records with the same machinery as the run's own process
(:class:`~ncompass.capture.recording_windows.RecordingWindows` driven by a trigger of
:mod:`~ncompass.capture.triggers`), started where it would have started its whole-run profiler
(its first import of torch or of a target module):

* by marker: it counts its own calls of the marker (:class:`MarkerWindows`);
* by time: the run's wall-clock span (:class:`TimedWindow` counting from the run's clock);
* on demand: the run's own process says in the run's private folder when each capture opens
  and closes (:class:`BroadcastCaptures`); the others follow it (:class:`FollowedCaptures`).

Under ``--profiler nvtx-trace`` a process's span is an
:class:`~ncompass.capture.recording_windows.NvtxWindowRange` (its own NVTX recorder's gate)
instead of a torch profiler: nothing is written here, the run's parent cuts window N of every
process from the recordings (:func:`ncompass.capture.nvtx_windows.write_recorded_windows`).

Under ``--profiler torch`` each process writes window N into ``NAME.processes/PID-wN.json``
and notes it in the run's folder (``window-PID-N.open`` when it opens, ``window-PID-N.json``
once written). When the run ends, :func:`merge_windows` merges window N of every process into
``NAME-wN.json``, one track per process, names each process that opened window N but never
wrote it, and, in one line per window, the processes whose marker never reached it
(:mod:`~ncompass.capture.follow.window_account`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from ncompass.capture.follow.exits import why_no_trace
from ncompass.capture.follow.window_account import WindowAccount, process_names
from ncompass.capture.recording_windows import RecordedSpan, RecordingWindows
from ncompass.capture.trace_files import claim_trace_path, release_claim
from ncompass.capture.triggers import MarkerWindows, RecordingWindowOptions, TimedWindow
from ncompass.errors import TraceError
from ncompass.traces.processes import ProcessTrace, merge_processes

if TYPE_CHECKING:
    from ncompass.capture.backends.base import ProfilerBackend
    from ncompass.capture.main_thread import MainThreadCalls
    from ncompass.capture.spans import SpanSink, Trigger, WindowRecord, WrittenSpan


class Followed(Protocol):
    """The part of :class:`~ncompass.capture.follow.bootstrap.Followed` windows read (the
    bootstrap imports this module, not the other way round)."""

    pid: int
    folder: str
    settings: dict[str, Any]


SETTINGS_KEY = "windows"
"""The key of the run's settings (``bootstrap.SETTINGS_FILE``) that holds its window choice."""

POLL_INTERVAL_S = 0.05
"""How often a followed process looks for the run's captures opening and closing."""

_OPEN_SUFFIX = ".open"
_WRITTEN_SUFFIX = ".json"
_WINDOW_PREFIX = "window-"
_CAPTURE_PREFIX = "capture-"


# --- the run's own process: what the children read, and the captures it tells them of -------


def window_settings(
    options: RecordingWindowOptions, traces: Path, started_unix_s: float
) -> dict[str, Any]:
    """The run's window choice as its children read it.

    Args:
        options: The run's windows.
        traces: The folder of per-process window traces (``NAME.processes/``).
        started_unix_s: When the run started (``--delay`` counts from it in every process).
    """
    return {"options": asdict(options), "traces": str(traces), "started_unix_s": started_unix_s}


class BroadcastCaptures:
    """The run's own on-demand trigger, telling the run's other processes when a capture opens
    (``capture-N.open``) and closes (``capture-N.closed``) in the run's private folder."""

    def __init__(
        self, trigger: Trigger, folder: Path, on_closed: Callable[[int, Path], object]
    ) -> None:
        self._trigger = trigger
        self._folder = folder
        self._on_closed = on_closed
        self._sink: _BroadcastingSink | None = None
        self.own_parts: dict[int, Path] = {}
        """The run's own part of each capture merged when it closed (moved beside the others)."""

    def install(self, sink: SpanSink) -> None:
        """Watch for captures, telling the others of each."""
        self._sink = _BroadcastingSink(sink, self._folder, self._on_closed)
        self._trigger.install(self._sink)

    def adopt_after_fork(self, sink: SpanSink) -> bool:
        """A forked child follows the run's captures with a trigger of its own."""
        return False

    def uninstall(self) -> str | None:
        """Stop watching; a capture the run's end closed is closed in the others too."""
        try:
            return self._trigger.uninstall()
        finally:
            number = self._sink._number if self._sink is not None else None
            if number is not None:
                with contextlib.suppress(OSError):
                    (self._folder / f"{_CAPTURE_PREFIX}{number}.closed").touch()


class _BroadcastingSink:
    def __init__(
        self, sink: SpanSink, folder: Path, on_closed: Callable[[int, Path], object]
    ) -> None:
        self._sink = sink
        self._folder = folder
        self._on_closed = on_closed
        self._number: int | None = None

    def prepare(self) -> None:
        self._sink.prepare()

    @property
    def recording(self) -> WindowRecord | None:
        return self._sink.recording

    @property
    def spans(self) -> Sequence[WrittenSpan]:
        return self._sink.spans

    def open(self, record: WindowRecord) -> bool:
        opened = self._sink.open(record)
        recording = self._sink.recording
        if opened and recording is not None:
            self._number = recording["number"]
            _write_json(self._folder / f"{_CAPTURE_PREFIX}{self._number}.open", dict(recording))
        return opened

    def close(self) -> Path | None:
        number, self._number = self._number, None
        if number is not None:
            (self._folder / f"{_CAPTURE_PREFIX}{number}.closed").touch()
        written = self._sink.close()
        if number is not None and written is not None:
            try:  # the path `ncompass capture` prints holds every process's part
                self._on_closed(number, written)
            except (TraceError, OSError) as error:
                print(
                    f"ncompass: warning: capture {number} not merged yet: {error}", file=sys.stderr
                )
        return written


def follow_captures(
    windows: RecordingWindows, folder: Path, on_closed: Callable[[int, Path], object]
) -> None:
    """Make the run's on-demand captures reach its other processes (before ``windows.begin``);
    ``on_closed(N, trace)`` merges capture N's parts once it has closed."""
    windows.trigger = BroadcastCaptures(windows.trigger, folder, on_closed)


def merge_capture(
    run_folder: Path,
    windows: RecordingWindows,
    number: int,
    trace: Path,
    processes: list[dict[str, Any]],
    traces: Path,
    alive: Callable[[int], bool],
    grace_s: float,
) -> None:
    """Merge capture ``number`` of every process into ``trace`` as soon as it closes.

    Waits up to ``grace_s`` for the processes still writing their part; one later than that
    is merged when the run ends (which merges every window again, with the final list).
    """
    if not isinstance(windows.trigger, BroadcastCaptures) or len(processes) < 2:
        return
    deadline = time.monotonic() + grace_s
    written, lost = _window_records(run_folder)
    while [pid for pid in lost.get(number, []) if alive(pid)] and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_S)
        written, lost = _window_records(run_folder)
    own_part = claim_trace_path(traces, f"{processes[0]['pid']}-w{number}")
    os.replace(trace, own_part)
    windows.trigger.own_parts[number] = own_part
    parts = written.get(number, {})
    _merge_window(number, trace, own_part, parts, processes, traces)


# --- a followed process: its own windows --------------------------------------------------


class FollowedCaptures:
    """A followed process's side of ``--on-demand``: records while the run's own process
    records a capture (numbered as the run numbers it), polling the run's private folder.

    The window opens and closes on the process's main thread, like the run's own.
    """

    def __init__(self, folder: Path, process_windows: ProcessWindows) -> None:
        self._folder = folder
        self._process = process_windows
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._main: MainThreadCalls | None = None

    def install(self, sink: SpanSink) -> None:
        """Start polling for the run's captures."""
        from ncompass.capture.main_thread import MainThreadCalls

        self._main = MainThreadCalls()
        self._main.install()
        self._thread = threading.Thread(
            target=self._poll, args=(sink,), name="ncompass-on-demand", daemon=True
        )
        self._thread.start()

    def _poll(self, sink: SpanSink) -> None:
        assert self._main is not None
        seen: set[int] = set()
        recording: int | None = None
        while not self._stopped.wait(POLL_INTERVAL_S):
            if recording is not None:
                if (self._folder / f"{_CAPTURE_PREFIX}{recording}.closed").exists():
                    self._main.call(functools.partial(self._process.close_noted, sink))
                    recording = None
                continue
            for number in _numbers(self._folder, _CAPTURE_PREFIX, ".open"):
                if number in seen:
                    continue
                seen.add(number)
                if (self._folder / f"{_CAPTURE_PREFIX}{number}.closed").exists():
                    continue  # it closed before this process looked
                record = _read_json(self._folder / f"{_CAPTURE_PREFIX}{number}.open") or {}
                window = cast("WindowRecord", {**record, "number": number})
                self._main.call(functools.partial(self._process.open_numbered, sink, window))
                recording = number
                break

    def adopt_after_fork(self, sink: SpanSink) -> bool:
        """A forked child polls with a trigger of its own (this one's thread is gone)."""
        return False

    def uninstall(self) -> str | None:
        """Stop polling (a capture still open is closed by the windows' end)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        if self._main is not None:
            self._main.uninstall()
        return None


class ProcessWindows:
    """The recording windows of one followed process (never the run's own).

    Wraps the process's :class:`RecordingWindows`: numbers each span as the run numbers it,
    writes it as ``NAME.processes/PID-wN.json`` and notes it in the run's folder.
    """

    def __init__(self, state: Followed, inherited: RecordingWindows | None = None) -> None:
        settings = state.settings[SETTINGS_KEY]
        self.pid: int = state.pid
        self.folder = Path(state.folder)
        self.traces = Path(settings["traces"])
        self._profiler: str = state.settings["profiler"]  # the run's: each window a profiler
        self._profiler_options: dict[str, Any] = dict(state.settings.get("profiler_options") or {})
        kind = state.settings.get("kind") or {}
        self._nvtx = not kind.get("per_process_traces")  # a window is the recorder's gate
        self._numbers: list[int] = []
        self._pending: int | None = None
        self._noted = 0
        self._claimed: list[Path] = []
        self.options = RecordingWindowOptions(**settings["options"])
        adopted = inherited.drop_after_fork() if inherited is not None else None
        if isinstance(adopted, _Counting):
            adopted = adopted.trigger
        trigger = self._trigger(settings, adopted)
        self.windows: RecordingWindows | None = None
        if trigger is not None:
            self.windows = RecordingWindows(
                trigger,
                self._make_backend,
                self.traces,
                str(self.pid),
                marks_only=self._nvtx,
                claims_traces=False,
            )

    def _trigger(self, settings: dict[str, Any], inherited: Trigger | None) -> Trigger | None:
        options = self.options
        if isinstance(inherited, MarkerWindows):  # the sites bound before the fork count into it
            return _Counting(inherited, self, adopt=True)
        if options.marker is not None:
            return _Counting(
                MarkerWindows(
                    options.marker, options.first, options.count, options.repeat, options.every
                ),
                self,
            )
        if options.on_demand:
            return FollowedCaptures(self.folder, self)
        timed = TimedWindow(options.delay or 0.0, options.duration)
        timed.count_from(settings["started_unix_s"])  # the run's clock, not this process's
        return _Counting(timed, self)

    def begin(self) -> None:
        """Hand the process to its trigger."""
        if self.windows is not None:
            self.windows.begin()

    def open_numbered(self, sink: SpanSink, record: WindowRecord) -> bool:
        """Open a span numbered as the run numbers it (its trace is ``PID-wN.json``)."""
        number = record["number"]
        self._pending = number
        try:
            opened = sink.open(record)
        finally:
            self._pending = None
        if opened:
            self._numbers.append(number)
            _write_json(self.folder / f"{_WINDOW_PREFIX}{self.pid}-{number}{_OPEN_SUFFIX}", {})
        return opened

    def close_noted(self, sink: SpanSink) -> Path | None:
        """Close the open span and note it written."""
        try:
            return sink.close()
        finally:
            self.note_written()

    def note_written(self) -> None:
        """Note each span written since the last call in the run's folder."""
        if self.windows is None:
            return
        for span in self.windows.spans[self._noted :]:
            number = self._numbers[self._noted] if self._noted < len(self._numbers) else 0
            self._noted += 1
            record = {
                "number": number,
                "trace": str(span.trace),
                "window": {**span.window, "number": number},
                "started_unix_s": span.started_unix_s,
                "duration_s": span.duration_s,
            }
            _write_json(
                self.folder / f"{_WINDOW_PREFIX}{self.pid}-{number}{_WRITTEN_SUFFIX}", record
            )

    def end(self) -> dict[str, Any]:
        """Close the open span (writing it) and stop; what this process's end record adds."""
        if self.windows is None:
            return {}
        try:
            self.windows.end()
        finally:
            self.note_written()
            written = {span.trace for span in self.windows.spans}
            for path in self._claimed:
                if path not in written:
                    release_claim(path)  # prepared for a window that never opened
        trigger = self.windows.trigger
        calls = trigger.calls if isinstance(trigger, _Counting) else None
        return {"window_calls": calls}

    def _make_backend(self, _trace: Path, number: int) -> ProfilerBackend:
        from ncompass.capture.backends import make_profiler

        run_number = self._pending if self._pending is not None else number
        if self._nvtx:  # the run's parent cuts this process's window from its recording
            from ncompass.capture.recording_windows import NvtxWindowRange, window_range_name

            return NvtxWindowRange(window_range_name(run_number), run_number)
        path = claim_trace_path(self.traces, f"{self.pid}-w{run_number}")
        self._claimed.append(path)
        return make_profiler(self._profiler, path, **self._profiler_options)


class _Counting:
    """A trigger of the run's (marker or time) whose spans a :class:`ProcessWindows` notes.

    A window that never opens is said once for the whole run, by the run's own process.

    Attributes:
        trigger: The run's trigger, as this process runs it.
    """

    def __init__(
        self,
        trigger: MarkerWindows | TimedWindow,
        process: ProcessWindows,
        *,
        adopt: bool = False,
    ) -> None:
        self.trigger = trigger
        self._process = process
        self._adopt = adopt

    @property
    def calls(self) -> int | None:
        return self.trigger.calls if isinstance(self.trigger, MarkerWindows) else None

    def install(self, sink: SpanSink) -> None:
        noting = _NotingSink(sink, self._process)
        if not (self._adopt and self.trigger.adopt_after_fork(noting)):
            self.trigger.install(noting)

    def adopt_after_fork(self, sink: SpanSink) -> bool:
        return False  # ProcessWindows adopts the trigger inside (see drop_after_fork)

    def uninstall(self) -> str | None:
        self.trigger.uninstall()
        return None


class _NotingSink:
    def __init__(self, sink: SpanSink, process: ProcessWindows) -> None:
        self._sink = sink
        self._process = process

    @property
    def recording(self) -> WindowRecord | None:
        return self._sink.recording

    @property
    def spans(self) -> Sequence[WrittenSpan]:
        return self._sink.spans

    def prepare(self) -> None:
        self._sink.prepare()

    def open(self, record: WindowRecord) -> bool:
        return self._process.open_numbered(self._sink, record)

    def close(self) -> Path | None:
        return self._process.close_noted(self._sink)


_process_windows: ProcessWindows | None = None
_run_windows: RecordingWindows | None = None


def adopt_run_windows(windows: RecordingWindows | None) -> None:
    """Note the run's own windows (None: the run ended): a process forked from the run's
    takes them over."""
    global _run_windows
    _run_windows = windows


def start_windows(state: Followed) -> None:
    """Start recording windows in this followed process (once)."""
    global _process_windows
    inherited = _run_windows
    if _process_windows is not None:
        if _process_windows.pid == os.getpid():
            return
        inherited = _process_windows.windows  # forked from a followed process
    _process_windows = ProcessWindows(state, inherited)
    _process_windows.begin()


def finish_windows(state: Followed) -> dict[str, Any]:
    """End this process's windows (writing the open one); what its end record adds."""
    global _process_windows
    windows, _process_windows = _process_windows, None
    if windows is None or windows.pid != os.getpid():
        return {}
    return windows.end()


# --- the run's own process, at the end: one trace per window --------------------------------


@dataclass(frozen=True)
class WindowTraces:
    """Where a run's window traces go when every process writes its own part (torch).

    Attributes:
        parts: The folder of per-process window traces (``NAME.processes/PID-wN.json``).
        folder / name: The run's trace folder and name (``NAME-wN.json``).
    """

    parts: Path
    folder: Path
    name: str


def merge_windows(
    run_folder: Path,
    windows: RecordingWindows,
    processes: list[dict[str, Any]],
    window_calls: dict[int, int | None],
    target: WindowTraces | None,
) -> tuple[dict[Path, list[dict[str, Any]]], list[str]]:
    """Merge window N of every process into ``NAME-wN.json``, one track per process, and say
    what the run's processes recorded.

    The run's own span traces move into ``target.parts`` (``ROOTPID-wN.json``) beside the
    others; spans only other processes recorded are added to ``windows.spans``. Without a
    ``target`` (the parent cuts the windows from the recordings: ``nvtx-trace``) nothing is
    merged, only said. The never-opened warning of ``windows`` is kept only when no process
    opened a window; a window some processes recorded names, in one line, the processes whose
    marker never reached it.

    Args:
        run_folder: The run's private folder (the processes' window records).
        windows: The run's own recording windows (ended).
        processes: Every process of the run, the run's own first (as the sidecar lists them).
        window_calls: By pid, the calls of the window's marker each other process counted
            (None: not a marker window, or the process never started its windows).
        target: Where the merged traces go (None: nothing to merge here).

    Returns:
        Each window trace's process list (its ``trace_file``: the process's part of that
        window), and the warning lines.
    """
    lists: dict[Path, list[dict[str, Any]]] = {}
    if len(processes) < 2:
        return lists, []  # no other process: the run's windows stay as written
    written, lost = _window_records(run_folder)
    root_pid = processes[0]["pid"]
    account = WindowAccount.of(windows, root_pid, written, lost, window_calls)
    if account.opened_anywhere:
        windows.warning = None  # some process opened a window
    elif windows.warning is not None and isinstance(windows.trigger, MarkerWindows):
        windows.warning = account.never_opened(windows.trigger, len(processes))
    warnings = account.silent(process_names(processes))
    if target is None:
        return lists, warnings
    own = {span.window["number"]: span for span in windows.spans}
    merged = windows.trigger.own_parts if isinstance(windows.trigger, BroadcastCaptures) else {}
    by_pid = {process["pid"]: process for process in processes}
    for number in sorted(set(own) | set(written) | set(lost)):
        parts = written.get(number, {})
        span = own.get(number)
        for pid in sorted(lost.get(number, [])):
            warnings.append(_lost(number, pid, by_pid.get(pid, {})))
        if span is None and not parts:
            continue
        own_part: Path | None = None
        if span is None:
            first = parts[min(parts)]
            trace = claim_trace_path(target.folder, f"{target.name}-w{number}")
            span = RecordedSpan(
                cast("WindowRecord", first["window"]),
                trace,
                cast("ProfilerBackend", _OtherProcesses()),
                min(part["started_unix_s"] for part in parts.values()),
                max(part["duration_s"] for part in parts.values()),
            )
            windows.spans.append(span)
        elif number in merged:  # merged when the capture closed: again, with every part
            own_part = merged[number]
        else:
            own_part = claim_trace_path(target.parts, f"{root_pid}-w{number}")
            os.replace(span.trace, own_part)
        listed, warning = _merge_window(
            number, span.trace, own_part, parts, processes, target.parts
        )
        lists[span.trace] = listed
        if warning is not None:
            warnings.append(warning)
    windows.spans.sort(key=lambda recorded: recorded.window["number"])
    return lists, warnings


def _window_records(
    run_folder: Path,
) -> tuple[dict[int, dict[int, dict[str, Any]]], dict[int, list[int]]]:
    """The processes' window parts written (by window, then pid) and those opened but never
    written (by window)."""
    written: dict[int, dict[int, dict[str, Any]]] = {}
    for path in run_folder.glob(f"{_WINDOW_PREFIX}*{_WRITTEN_SUFFIX}"):
        pid, number = _pid_and_number(path.name, _WRITTEN_SUFFIX)
        record = _read_json(path)
        if pid is not None and record is not None and Path(record["trace"]).is_file():
            written.setdefault(number, {})[pid] = record
    lost: dict[int, list[int]] = {}
    for path in run_folder.glob(f"{_WINDOW_PREFIX}*{_OPEN_SUFFIX}"):
        pid, number = _pid_and_number(path.name, _OPEN_SUFFIX)
        if pid is not None and pid not in written.get(number, {}):
            lost.setdefault(number, []).append(pid)
    return written, lost


def _merge_window(
    number: int,
    target: Path,
    own_part: Path | None,
    parts: dict[int, dict[str, Any]],
    processes: list[dict[str, Any]],
    traces: Path,
) -> tuple[list[dict[str, Any]], str | None]:
    """Merge one window's parts into ``target``; its process list, and a warning if it failed."""
    files = {pid: Path(part["trace"]) for pid, part in parts.items()}
    if own_part is not None:
        files[processes[0]["pid"]] = own_part
    listed = [
        {**process, "trace_file": str(files[process["pid"]]) if process["pid"] in files else None}
        for process in processes
    ]
    known = {process["pid"] for process in processes}
    listed += [  # a process that wrote its window but not its records (still starting)
        {"pid": pid, "role": None, "trace_file": str(path)}
        for pid, path in files.items()
        if pid not in known
    ]
    inputs = [
        ProcessTrace(Path(p["trace_file"]), p["pid"], p.get("role") or str(p["pid"]))
        for p in listed
        if p["trace_file"]
    ]
    try:
        merge_processes(inputs, target, metadata={"ncompass_processes": listed})
    except (TraceError, OSError) as error:
        if own_part is not None:
            shutil.copyfile(own_part, target)
        return listed, (
            f"window {number}: the processes' traces were not merged ({error}); they are in "
            f"{traces}"
        )
    return listed, None


class _OtherProcesses:
    """The profiler of a window only the run's other processes recorded (none of its own)."""

    name = "torch"


def _lost(number: int, pid: int, process: dict[str, Any]) -> str:
    who = process.get("role") or process.get("command") or "a child"
    return (
        f"process {pid} ({who}) left no trace of window {number}: "
        f"{why_no_trace(process.get('exit_code'))}; its part of the window is lost"
    )


def _pid_and_number(name: str, suffix: str) -> tuple[int | None, int]:
    pid, _, number = name[len(_WINDOW_PREFIX) : -len(suffix)].partition("-")
    try:
        return int(pid), int(number)
    except ValueError:
        return None, 0


def _numbers(folder: Path, prefix: str, suffix: str) -> list[int]:
    numbers: list[int] = []
    for path in folder.glob(f"{prefix}*{suffix}"):
        with contextlib.suppress(ValueError):
            numbers.append(int(path.name[len(prefix) : -len(suffix)]))
    return sorted(numbers)


def _write_json(path: Path, value: object) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        partial.write_text(json.dumps(value), encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass  # the run's folder is gone: the run has ended


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


__all__ = [
    "SETTINGS_KEY",
    "BroadcastCaptures",
    "FollowedCaptures",
    "ProcessWindows",
    "WindowTraces",
    "adopt_run_windows",
    "finish_windows",
    "follow_captures",
    "merge_capture",
    "merge_windows",
    "start_windows",
    "window_settings",
]

"""The recording windows' state machines, without a profiler or a second process.

A fake :class:`~ncompass.capture.spans.SpanSink` records what a trigger asks of it; a fake
backend stands in for the profiler (what it writes is a file, as the torch profiler's is).
Real marker sites (``runtime.sites.bind``) count the calls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ncompass.capture.follow.window_account import WindowAccount
from ncompass.capture.follow.windows import merge_windows
from ncompass.capture.recording_windows import RecordedSpan, RecordingWindows
from ncompass.capture.spans import WindowRecord
from ncompass.capture.triggers import MarkerWindows, TimedWindow
from ncompass.runtime.sites import bind


class FakeSink:
    """A SpanSink that notes each request: ``prepare``, ``open N``, ``close``."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.recording: WindowRecord | None = None
        self.spans: Sequence[RecordedSpan] = []

    def prepare(self) -> None:
        self.events.append("prepare")

    def open(self, record: WindowRecord) -> bool:
        if self.recording is not None:
            return False
        self.recording = record
        self.events.append(f"open {record['number']}")
        return True

    def close(self) -> Path | None:
        if self.recording is None:
            return None
        self.recording = None
        self.events.append("close")
        return None


def _call(marker: str, times: int, log: list[str]) -> None:
    """Call a site of ``marker`` ``times`` times, noting each call's enter and exit."""
    enter, exit = bind("noop", marker)
    for call in range(1, times + 1):
        handle = enter()
        log.append(f"call {call}")
        exit(handle)


def test_marker_windows_prepare_open_and_close_on_schedule() -> None:
    sink = FakeSink()
    windows = MarkerWindows("model.step", first=3, count=2, repeat=2, every=4)
    windows.install(sink)
    log: list[str] = []
    sink.events = log  # one list: the sink's requests between the calls

    _call("model.step", 10, log)
    warning = windows.uninstall()

    assert log == [
        "call 1",
        "prepare",  # at the enter of call 2, before the window's first call
        "call 2",
        "open 1",
        "call 3",
        "call 4",
        "close",  # at the exit of call 4, after its range
        "call 5",
        "prepare",
        "call 6",
        "open 2",
        "call 7",
        "call 8",
        "close",
        "call 9",
        "call 10",
    ]
    assert warning is None
    assert windows.calls == 10
    assert windows.first_calls() == {1: 3, 2: 7}


def test_a_forked_copy_counts_its_own_calls_from_one() -> None:
    parent = FakeSink()
    windows = MarkerWindows("model.fork", first=2, count=1)
    windows.install(parent)
    _call("model.fork", 3, [])  # the parent's calls: one window, done
    child = FakeSink()

    assert windows.adopt_after_fork(child) is True
    _call("model.fork", 2, [])

    assert parent.events == ["prepare", "open 1", "close"]
    assert child.events == ["prepare", "open 1", "close"]
    assert windows.calls == 2


def test_a_marker_window_that_never_opens_says_so() -> None:
    windows = MarkerWindows("model.rare", first=5, count=1)
    windows.install(FakeSink())
    _call("model.rare", 2, [])

    assert windows.uninstall() == (
        "ncompass: warning: window model.rare:5:1 never opened: the marker model.rare had 2 "
        "calls in this process; nothing was recorded"
    )


def test_a_process_started_after_the_time_window_records_and_says_nothing() -> None:
    sink = FakeSink()
    window = TimedWindow(1.0, 2.0)
    window.count_from(time.time() - 60)  # the run's clock: its window closed long ago

    window.install(sink)

    assert sink.events == []
    assert window.uninstall() is None
    assert window.adopt_after_fork(sink) is False


def test_a_process_started_inside_the_time_window_opens_at_once() -> None:
    sink = FakeSink()
    window = TimedWindow(1.0, 600.0)
    window.count_from(time.time() - 5)  # opened 4 s ago on the run's clock
    clocks: list[float] = []
    window.on_clock = clocks.append

    window.install(sink)
    try:
        assert sink.events == ["prepare", "open 1"]
        assert sink.recording == {
            "number": 1,
            "trigger": "time",
            "delay_s": 1.0,
            "duration_s": 600.0,
        }
    finally:
        assert window.uninstall() is None
    assert clocks == []  # a follower keeps the run's clock, it starts none of its own


def test_the_runs_own_clock_starts_after_the_profiler_is_prepared() -> None:
    sink = FakeSink()
    window = TimedWindow(600.0, None)
    clocks: list[float] = []
    window.on_clock = clocks.append
    before = time.time()

    window.install(sink)
    try:
        assert sink.events == ["prepare"]
        assert len(clocks) == 1 and clocks[0] >= before
        assert window.span_unix_s() == (clocks[0] + 600.0, None)
    finally:
        window.uninstall()


class FakeBackend:
    """A profiler that writes ``{"number": N}`` to its trace when stopped."""

    name = "fake"
    marker_context = "noop"

    def __init__(self, trace: Path, number: int, log: list[str]) -> None:
        self.trace = trace
        self.number = number
        self.log = log

    def prepare(self) -> None:
        self.log.append(f"prepare {self.number}")

    def start(self) -> None:
        self.log.append(f"start {self.number}")

    def stop(self) -> Path | None:
        self.log.append(f"stop {self.number}")
        self.trace.write_text(json.dumps({"number": self.number}))
        return self.trace

    def stop_and_discard(self) -> None:
        self.log.append(f"discard {self.number}")


def _windows(tmp_path: Path, trigger: Any, log: list[str]) -> RecordingWindows:
    """RecordingWindows as a followed process uses them: it claims no trace of its own."""
    return RecordingWindows(
        trigger,
        lambda trace, number: FakeBackend(trace, number, log),
        tmp_path,
        "4242",
        claims_traces=False,
    )


def test_recording_windows_open_one_span_at_a_time(tmp_path: Path) -> None:
    log: list[str] = []
    windows = _windows(tmp_path, MarkerWindows("model.unused", 1, 1), log)

    windows.prepare()
    assert windows.open({"number": 7, "trigger": "marker"}) is True
    assert windows.open({"number": 8, "trigger": "marker"}) is False  # one is open
    assert windows.recording == {"number": 1, "trigger": "marker"}  # numbered by its spans
    windows.prepare()  # deferred until the span closes: one profiler at a time
    written = windows.close()

    assert written == tmp_path / "4242-w1.json"
    assert log == ["prepare 1", "start 1", "stop 1", "prepare 2"]
    assert [span.window["number"] for span in windows.spans] == [1]
    assert windows.close() is None


def test_a_forked_child_drops_its_copy_without_writing(tmp_path: Path) -> None:
    log: list[str] = []
    trigger = MarkerWindows("model.dropped", 1, 1)
    windows = _windows(tmp_path, trigger, log)
    windows.open({"number": 1, "trigger": "marker"})

    assert windows.drop_after_fork() is trigger
    assert windows.open({"number": 2, "trigger": "marker"}) is False  # ended
    windows.prepare()

    assert log == ["prepare 1", "start 1", "discard 1"]
    assert windows.spans == []
    assert list(tmp_path.iterdir()) == []


def test_the_account_names_processes_that_never_reached_a_window() -> None:
    account = WindowAccount(
        recorded={1: {10}, 2: {10, 11}},
        calls={10: 9, 11: 6, 12: 0, 13: 2},
        marker="train.step",
        firsts={1: 3, 2: 6},
    )
    names = {10: "main", 11: "rank 1", 12: "DataLoader worker 0", 13: "DataLoader worker 1"}

    assert account.opened_anywhere
    assert account.silent(names) == [  # rank 1 counted past its first call: not silent
        "window 1: 2 of 4 processes recorded nothing in it (DataLoader worker 0, "
        "DataLoader worker 1): they called train.step fewer than 3 times (0, 2)",
        "window 2: 2 of 4 processes recorded nothing in it (DataLoader worker 0, "
        "DataLoader worker 1): they called train.step fewer than 6 times (0, 2)",
    ]


def test_the_account_of_a_time_window_names_nobody() -> None:
    account = WindowAccount(recorded={1: {10}}, calls={})

    assert account.silent({10: "main"}) == []


def _record(folder: Path, name: str, value: object) -> None:
    (folder / name).write_text(json.dumps(value))


def test_merge_windows_keeps_the_books_when_the_parent_cuts_the_traces(tmp_path: Path) -> None:
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    windows = _windows(tmp_path, MarkerWindows("model.step", 2, 1), [])
    windows.warning = "ncompass: warning: window model.step:2:1 never opened: ..."
    _record(run_folder, "window-101-1.open", {})  # a worker opened window 1
    processes = [
        {"pid": 100, "role": "main.py"},
        {"pid": 101, "role": "worker 0"},
        {"pid": 102, "role": "worker 1"},
    ]

    lists, warnings = merge_windows(run_folder, windows, processes, {101: 4, 102: 0}, None)

    assert lists == {}
    assert windows.warning is None  # some process opened a window
    assert warnings == [
        "window 1: 2 of 3 processes recorded nothing in it (main.py, worker 1): they never "
        "called model.step",
    ]


def test_merge_windows_says_never_opened_once_for_the_whole_run(tmp_path: Path) -> None:
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    windows = _windows(tmp_path, MarkerWindows("model.step", 5, 1), [])
    windows.warning = "ncompass: warning: window model.step:5:1 never opened: ..."
    processes = [{"pid": 100, "role": "main.py"}, {"pid": 101, "role": "worker 0"}]

    _, warnings = merge_windows(run_folder, windows, processes, {101: 3}, None)

    assert warnings == []
    assert windows.warning == (
        "ncompass: warning: window model.step:5:1 never opened in any of the run's 2 "
        "processes: the marker model.step had at most 3 calls in one process; nothing was "
        "recorded"
    )


def test_merge_windows_of_a_run_without_children_changes_nothing(tmp_path: Path) -> None:
    windows = _windows(tmp_path, MarkerWindows("model.step", 5, 1), [])
    windows.warning = "kept"
    run_folder = tmp_path / "run"
    run_folder.mkdir()

    assert merge_windows(run_folder, windows, [{"pid": 100}], {}, None) == ({}, [])
    assert windows.warning == "kept"

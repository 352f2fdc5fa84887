"""What opens and closes a run's recording windows: the Nth call of a marker, a clock, a request.

A *recording window* is a stretch of the run that the profiler records; everything outside it
is not recorded. A trigger decides when windows open and close and tells a :class:`SpanSink`
(:class:`~ncompass.capture.recording_windows.RecordingWindows`), which starts a profiler for
each *span* (one opened-and-closed window) and writes its trace. Three triggers:

* :class:`MarkerWindows` (``--window MARKER:FIRST:COUNT``): counts the calls of one marker in
  this process, at the marker's enter, through the runtime's neutral site hook
  (:func:`ncompass.runtime.sites.hook_sites`). Only the named marker's sites are wrapped; every
  other marker keeps its own enter and exit.
* :class:`TimedWindow` (``--delay``/``--duration``): a timer thread.
* :class:`OnDemandWindows` (``ncompass capture PID``): a thread polling the run's control
  folder (:mod:`ncompass.capture.control_folder`).

Every trigger keeps its state in the process that runs it, so each process of a run counts
its own calls.
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ncompass.capture.spans import SpanSink, Trigger, WindowRecord
from ncompass.errors import CaptureError

if TYPE_CHECKING:
    from pathlib import Path

    from ncompass.capture.main_thread import MainThreadCalls


@dataclass(frozen=True)
class RecordingWindowOptions:
    """The recording windows ``ncompass run`` was asked for (at most one way of choosing).

    Attributes:
        marker / first / count: ``--window MARKER:FIRST:COUNT``.
        repeat / every: ``--repeat N --every K``: N windows, starting K calls apart.
        delay / duration: ``--delay SECONDS --duration SECONDS`` (duration None: to the end).
        on_demand: ``--on-demand``: windows are opened by ``ncompass capture PID``.
    """

    marker: str | None = None
    first: int = 1
    count: int = 1
    repeat: int = 1
    every: int | None = None
    delay: float | None = None
    duration: float | None = None
    on_demand: bool = False

    def command_line(self) -> list[str]:
        """The ``ncompass run`` options that ask for these windows again (a re-executed run)."""
        arguments: list[str] = []
        if self.marker is not None:
            arguments += ["--window", f"{self.marker}:{self.first}:{self.count}"]
            if self.repeat != 1:
                arguments += ["--repeat", str(self.repeat)]
            if self.every is not None:
                arguments += ["--every", str(self.every)]
        if self.delay is not None:
            arguments += ["--delay", repr(self.delay)]
        if self.duration is not None:
            arguments += ["--duration", repr(self.duration)]
        if self.on_demand:
            arguments.append("--on-demand")
        return arguments

    def trigger(self, control: Callable[[], Path]) -> Trigger:
        """The trigger these options ask for (``control``: the run's control folder, made on
        demand)."""
        if self.marker is not None:
            return MarkerWindows(self.marker, self.first, self.count, self.repeat, self.every)
        if self.on_demand:
            return OnDemandWindows(control())
        return TimedWindow(self.delay or 0.0, self.duration)


def parse_window(text: str) -> tuple[str, int, int]:
    """``MARKER:FIRST:COUNT`` → its parts (the marker name may itself hold colons).

    Raises:
        CaptureError: malformed, or FIRST or COUNT below 1.
    """
    marker, _, rest = text.rpartition(":")
    marker, _, first_text = marker.rpartition(":")
    try:
        first, count = int(first_text), int(rest)
    except ValueError:
        first = count = 0
        marker = ""
    if not marker:
        raise CaptureError(
            f"--window {text!r}: write MARKER:FIRST:COUNT, e.g. train.step:1000:5 "
            "(calls 1000 to 1004 of the marker train.step)"
        )
    if first < 1:
        raise CaptureError(f"--window {text!r}: FIRST counts calls from 1; got {first}")
    if count < 1:
        raise CaptureError(f"--window {text!r}: COUNT must be at least 1; got {count}")
    return marker, first, count


class _ClosingHandle:
    """The handle of the call that ends a window: its exit closes the span after the range."""

    __slots__ = ("handle",)

    def __init__(self, handle: object) -> None:
        self.handle = handle


_PREPARE, _OPEN, _CLOSE = 0, 1, 2


class MarkerWindows:
    """``--window MARKER:FIRST:COUNT [--repeat N --every K]``: windows by calls of a marker.

    Window ``i`` (from 0) opens at the enter of call ``FIRST + i*K`` (before its range
    starts) and closes at the exit of call ``FIRST + i*K + COUNT - 1`` (after its range
    ends), so it holds those calls whole and everything between them. The profiler is
    prepared at the enter of the call before the window's first (or at once for call 1).
    Calls are counted per process, at enter, in the order they start (all threads).
    """

    def __init__(
        self, marker: str, first: int, count: int, repeat: int = 1, every: int | None = None
    ) -> None:
        if repeat < 1:
            raise CaptureError(f"--repeat must be at least 1; got {repeat}")
        if repeat > 1 and every is None:
            raise CaptureError("--repeat needs --every K: how many calls apart windows start")
        if every is not None and every < count:
            raise CaptureError(
                f"--every {every} is less than the window's COUNT {count}: windows would overlap"
            )
        self.marker = marker
        self.first = first
        self.count = count
        self._counter = itertools.count(1)
        self._failed = False
        self._windows = [(first + i * (every or 0), count) for i in range(repeat)]
        events: list[tuple[int, int, int]] = []
        for number, (start, length) in enumerate(self._windows, 1):
            if start > 1:
                events.append((start - 1, _PREPARE, number))
            events.append((start, _OPEN, number))
            events.append((start + length - 1, _CLOSE, number))
        self._events = sorted(events)
        self._next = 0
        self._next_call = self._events[0][0]
        self._opened = 0
        self._lock = threading.Lock()
        self._sink: SpanSink | None = None

    def install(self, sink: SpanSink) -> None:
        """Count the marker's calls from now on (its sites must be bound after this)."""
        from ncompass.runtime.sites import hook_sites

        self._sink = sink
        if self._events[0] == (1, _OPEN, 1):
            sink.prepare()
        hook_sites(self.marker, self._wrap)

    def adopt_after_fork(self, sink: SpanSink) -> bool:
        """Count this process's calls from 1 again, into ``sink``: a forked child takes over
        the windows it inherited (the sites bound before the fork count into this object)."""
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self._failed = False
        self._next = 0
        self._next_call = self._events[0][0]
        self._opened = 0
        self._sink = sink
        if self._events[0] == (1, _OPEN, 1):
            sink.prepare()
        return True

    def first_calls(self) -> dict[int, int]:
        """Each window's first call of the marker, by window number."""
        return {number: start for number, (start, _) in enumerate(self._windows, 1)}

    @property
    def calls(self) -> int:
        """The calls of the marker counted so far."""
        return int(repr(self._counter)[len("count(") : -1]) - 1  # "count(N)": N comes next

    def uninstall(self) -> str | None:
        """Stop counting new sites; say so if no window opened."""
        from ncompass.runtime.sites import hook_sites

        hook_sites(self.marker, None)
        if self._opened:
            return None
        calls = f"{self.calls} call{'s' if self.calls != 1 else ''}"
        return (
            f"ncompass: warning: window {self.marker}:{self.first}:{self.count} never opened: "
            f"the marker {self.marker} had {calls} in this process; nothing was recorded"
        )

    def _wrap(
        self, enter: Callable[..., object], exit: Callable[[object], object]
    ) -> tuple[Callable[..., object], Callable[[object], object]]:
        windows = self  # one counter for every site of the marker (a forked child restarts it)

        def counted_enter(*args: Any) -> object:
            call = next(windows._counter)  # atomic: threads never count one call twice
            if call < windows._next_call:
                return enter(*args)
            closes = windows._at_call(call)
            handle = enter(*args)
            return _ClosingHandle(handle) if closes else handle

        def counted_exit(handle: object) -> object:
            if type(handle) is not _ClosingHandle:
                return exit(handle)
            try:
                return exit(handle.handle)
            finally:
                windows._close()

        return counted_enter, counted_exit

    def _at_call(self, call: int) -> bool:
        """Prepare or open what is due at this call; True when the call ends a window."""
        closes = False
        with self._lock:
            while self._next < len(self._events) and self._events[self._next][0] <= call:
                # (a call on another thread may have counted past an event: it is done now)
                _, kind, number = self._events[self._next]
                self._next += 1
                sink = self._sink
                if sink is None or self._failed:
                    continue
                if kind == _PREPARE:
                    self._guarded(sink.prepare)
                elif kind == _OPEN:
                    start, length = self._windows[number - 1]
                    record: WindowRecord = {
                        "number": number,
                        "trigger": "marker",
                        "marker": self.marker,
                        "first_call": start,
                        "last_call": start + length - 1,
                    }
                    if self._guarded(functools.partial(sink.open, record)):
                        self._opened += 1
                else:
                    closes = True
            self._next_call = (
                self._events[self._next][0] if self._next < len(self._events) else 1 << 62
            )
        return closes

    def _close(self) -> None:
        if self._sink is not None and not self._failed:
            self._guarded(self._sink.close)

    def _guarded(self, action: Callable[[], object]) -> object:
        """Run a span change inside the marker's call: a failure is one warning line and ends
        the windows, never an exception in the profiled code."""
        try:
            return action()
        except Exception as error:
            self._failed = True
            print(f"ncompass: warning: recording windows stopped: {error}", file=sys.stderr)
            return None


class TimedWindow:
    """``--delay SECONDS --duration SECONDS``: one window, by the clock (a timer thread).

    The profiler is prepared at once; the window opens ``delay`` seconds after the profiled
    code starts and closes ``duration`` seconds later (None: when the run ends). The timer
    asks the main thread to open and close it (:mod:`ncompass.capture.main_thread`).

    In a run that follows its processes, every process keeps the run's clock: the run's own
    process says when its clock started (:attr:`on_clock`), the others count from then
    (:meth:`count_from`). The window is one wall-clock span, ``[start + delay, start + delay +
    duration)``, whenever each process itself started; a process that starts inside it records
    what is left of it, one that starts after it records nothing and says nothing.
    """

    def __init__(self, delay: float, duration: float | None) -> None:
        if delay < 0 or (duration is not None and duration <= 0):
            raise CaptureError(
                "--delay must be 0 or more and --duration more than 0 seconds; "
                f"got --delay {delay} --duration {duration}"
            )
        self.delay = delay
        self.duration = duration
        self.start_unix_s: float | None = None
        """The wall-clock time ``delay`` counts from (None: from ``install``, once the
        profiler is prepared)."""
        self.on_clock: Callable[[float], object] | None = None
        """Told when this trigger's own clock starts (the run's other processes follow it)."""
        self._stopped = threading.Event()
        self._opened = False
        self._thread: threading.Thread | None = None
        self._main: MainThreadCalls | None = None

    def count_from(self, start_unix_s: float) -> None:
        """Count ``delay`` from ``start_unix_s`` (the run's start), not from ``install``."""
        self.start_unix_s = start_unix_s

    def span_unix_s(self) -> tuple[float, float | None]:
        """When the window opens and closes (wall clock; None: at the run's end), once
        installed or counted from a start."""
        start = self.start_unix_s if self.start_unix_s is not None else time.time()
        opens = start + self.delay
        return opens, None if self.duration is None else opens + self.duration

    def install(self, sink: SpanSink) -> None:
        """Prepare the profiler and start the clock."""
        from ncompass.capture.main_thread import MainThreadCalls

        if self.start_unix_s is None:
            sink.prepare()  # its start-up is not part of the delay
            self.start_unix_s = time.time()
            if self.on_clock is not None:
                self.on_clock(self.start_unix_s)
        else:
            _, closes = self.span_unix_s()
            if closes is not None and time.time() >= closes:
                self._opened = True  # closed before this process started: nothing to record
                return
            sink.prepare()
        opens, _ = self.span_unix_s()
        record: WindowRecord = {
            "number": 1,
            "trigger": "time",
            "delay_s": self.delay,
            "duration_s": self.duration,
        }
        if time.time() >= opens:  # open already: no thread needed to open it
            self._opened = sink.open(record)
        self._main = MainThreadCalls()
        self._main.install()
        self._thread = threading.Thread(
            target=self._run, args=(sink, record), name="ncompass-recording-window", daemon=True
        )
        self._thread.start()

    def _run(self, sink: SpanSink, record: WindowRecord) -> None:
        assert self._main is not None
        opens, closes = self.span_unix_s()
        if not self._opened:
            if self._stopped.wait(max(0.0, opens - time.time())):
                return

            def open_window() -> None:
                self._opened = sink.open(record)

            self._main.call(open_window)
        if closes is not None and not self._stopped.wait(max(0.0, closes - time.time())):
            self._main.call(sink.close)

    def adopt_after_fork(self, sink: SpanSink) -> bool:
        """A forked child cannot carry the clock on (its thread did not survive the fork)."""
        return False

    def uninstall(self) -> str | None:
        """Stop the clock; say so if the run ended before the delay."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        if self._main is not None:
            self._main.uninstall()
        if self._opened:
            return None
        return (
            f"ncompass: warning: the run ended before --delay {self.delay:g} s; "
            "nothing was recorded"
        )


class OnDemandWindows:
    """``--on-demand``: windows opened and closed by ``ncompass capture PID``.

    A thread polls the run's control folder (:mod:`ncompass.capture.control_folder`) for
    requests and asks the main thread to open and close spans; a span closes after its
    duration, at a stop request, or when the run ends.
    """

    def __init__(self, control: Path) -> None:
        self.control = control
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._main: MainThreadCalls | None = None

    def install(self, sink: SpanSink) -> None:
        """Start polling for requests."""
        from ncompass.capture.control_folder import serve_requests
        from ncompass.capture.main_thread import MainThreadCalls

        self._main = MainThreadCalls()
        self._main.install()
        self._thread = threading.Thread(
            target=serve_requests,
            args=(self.control, sink, self._main, self._stopped),
            name="ncompass-on-demand",
            daemon=True,
        )
        self._thread.start()

    def adopt_after_fork(self, sink: SpanSink) -> bool:
        """A forked child does not serve the run's requests (the run's own process does)."""
        return False

    def uninstall(self) -> str | None:
        """Stop polling and remove the control folder."""
        from ncompass.capture.control_folder import remove_control_folder

        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        if self._main is not None:
            self._main.uninstall()
        remove_control_folder(self.control)
        return None


__all__ = [
    "MarkerWindows",
    "OnDemandWindows",
    "RecordingWindowOptions",
    "SpanSink",
    "TimedWindow",
    "Trigger",
    "WindowRecord",
    "parse_window",
]

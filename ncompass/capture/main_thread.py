"""Run a function on the main thread from another thread, at the main thread's next bytecode.

The torch profiler records the thread that starts it, and only that thread can stop it (its
state is thread-local). A window opened by a clock or a request (threads of their own) must
therefore open and close on the thread that runs the program: the main thread of a
``ncompass run``. Python runs signal handlers on the main thread, between bytecodes, and a
signal interrupts a blocking wait (``sleep``, ``select``), so a real-time signal the program
does not use carries the request; the handler runs what is queued. POSIX only.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from ncompass.errors import CaptureError


def _signal_number() -> int:
    realtime_max = getattr(signal, "SIGRTMAX", None)
    if realtime_max is None or not hasattr(signal, "pthread_kill"):
        raise CaptureError(
            "recording windows by time or on demand need POSIX signals; use --window MARKER"
        )
    return int(realtime_max) - 3  # a real-time signal: never sent by the system itself


class MainThreadCalls:
    """A queue of calls the main thread runs, woken by a signal (installed while in use)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._signal = _signal_number()
        self._main = threading.main_thread().ident
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        """Handle the signal (on the main thread, before the program runs)."""
        try:
            self._previous = signal.signal(self._signal, self._handle)
        except ValueError:  # not the main thread
            raise CaptureError(
                "recording windows by time or on demand need the run on the main thread"
            ) from None
        self._installed = True

    def uninstall(self) -> None:
        """Give the signal back to what handled it before."""
        if self._installed:
            signal.signal(self._signal, self._previous)
            self._installed = False

    def call(self, function: Callable[[], object]) -> None:
        """Queue ``function`` for the main thread and wake it."""
        self._calls.put(function)
        if self._installed and self._main is not None:
            signal.pthread_kill(self._main, self._signal)

    def run_queued(self) -> None:
        """Run what is queued (on the main thread)."""
        while True:
            try:
                function = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                function()
            except Exception as error:  # raised here, it would stop the program mid-statement
                print(f"ncompass: warning: recording window: {error}", file=sys.stderr)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.run_queued()


__all__ = ["MainThreadCalls"]

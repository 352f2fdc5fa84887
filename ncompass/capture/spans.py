"""The words recording windows are made of: what opened a span, and who opens and closes spans.

A *recording window* is a stretch of a run the profiler records; a *span* is one window as it
was recorded (opened, then closed, one trace). Triggers (:mod:`ncompass.capture.triggers`)
drive a :class:`SpanSink` (:class:`~ncompass.capture.recording_windows.RecordingWindows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

# typing_extensions' TypedDict: pydantic validates only it on Python < 3.12 (like the sidecar)
from typing_extensions import TypedDict


class WindowRecord(TypedDict, total=False):
    """What opened one span, as its sidecar's ``window`` holds it.

    Attributes:
        number: The span's number in the run (1 for ``-w1``).
        trigger: ``marker``, ``time`` or ``demand``.
        marker / first_call / last_call: For ``marker``: the calls of the marker recorded.
        delay_s / duration_s: For ``time`` (and ``duration_s`` for ``demand``, when given).
    """

    number: int
    trigger: str
    marker: str
    first_call: int
    last_call: int
    delay_s: float
    duration_s: float | None


class WrittenSpan(Protocol):
    """One span once written (:class:`~ncompass.capture.recording_windows.RecordedSpan`)."""

    @property
    def window(self) -> WindowRecord:
        """What opened it."""

    @property
    def trace(self) -> Path:
        """Its trace file."""


class SpanSink(Protocol):
    """What triggers drive: prepares the profiler, opens and closes spans."""

    @property
    def recording(self) -> WindowRecord | None:
        """The window of the open span, if one is open (its ``number`` as the sink numbers it)."""

    @property
    def spans(self) -> Sequence[WrittenSpan]:
        """The spans written so far, in order."""

    def prepare(self) -> None:
        """Start the next span's profiler up without recording (before the window opens)."""

    def open(self, record: WindowRecord) -> bool:
        """Begin recording a span; False when one is open already (the request is dropped)."""

    def close(self) -> Path | None:
        """End the open span and write its trace (None when no span is open)."""


class Trigger(Protocol):
    """Opens and closes spans of a :class:`SpanSink` from ``install`` to ``uninstall``."""

    def install(self, sink: SpanSink) -> None:
        """Start watching (called before the profiled code runs)."""

    def uninstall(self) -> str | None:
        """Stop watching; returns a warning line when a window never opened."""

    def adopt_after_fork(self, sink: SpanSink) -> bool:
        """In a forked child, carry on into ``sink`` from this copy of the parent's trigger
        (the child's own count, from nothing); False when it cannot (its threads did not
        survive the fork): the child installs a fresh trigger instead."""


__all__ = ["SpanSink", "Trigger", "WindowRecord", "WrittenSpan"]

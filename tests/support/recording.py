"""A custom range context that records every enter and exit (tests name it in their specs)."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

EVENTS: list[tuple[str, str]] = []
EXCEPTIONS: list[tuple[str, type[BaseException] | None]] = []
_LOCK = threading.Lock()

CONTEXT = "tests.support.recording:RecordingContext"


class RecordingContext:
    """Appends ("enter", name) / ("exit", name) to :data:`EVENTS`."""

    def __init__(self, name: str, values: dict[str, Any] | None = None) -> None:
        self.name = name
        self.values = values

    def __enter__(self) -> RecordingContext:
        with _LOCK:
            EVENTS.append(("enter", self.name))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with _LOCK:
            EVENTS.append(("exit", self.name))
            EXCEPTIONS.append((self.name, exc_type))


def reset() -> None:
    """Forget recorded events."""
    with _LOCK:
        EVENTS.clear()
        EXCEPTIONS.clear()


def names_entered() -> list[str]:
    """Marker names in the order they were entered."""
    return [name for kind, name in EVENTS if kind == "enter"]


def balanced() -> bool:
    """Whether every enter has its exit, properly nested."""
    stack: list[str] = []
    for kind, name in EVENTS:
        if kind == "enter":
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack

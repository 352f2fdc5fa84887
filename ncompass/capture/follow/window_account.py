"""Which process of a run recorded which recording window, and what to say about the rest.

The run's own process keeps this account when the run ends (:func:`~ncompass.capture.follow.
windows.merge_windows`): from the records the processes left in the run's folder, the spans of
its own, and each process's count of the window's marker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncompass.capture.recording_windows import RecordingWindows
from ncompass.capture.triggers import MarkerWindows


@dataclass
class WindowAccount:
    """Which process recorded which window of a run, and how far each counted the marker.

    Attributes:
        recorded: By window number, the pids that opened it (written or lost since).
        calls: By pid, the marker's calls the process counted (the processes that ran marker
            windows only).
        marker / firsts: The marker and each window's first call (marker windows only).
    """

    recorded: dict[int, set[int]]
    calls: dict[int, int]
    marker: str | None = None
    firsts: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        windows: RecordingWindows,
        root_pid: int,
        written: dict[int, dict[int, dict[str, Any]]],
        lost: dict[int, list[int]],
        window_calls: dict[int, int | None],
    ) -> WindowAccount:
        """The account of a run whose own windows are ``windows`` (ended)."""
        recorded: dict[int, set[int]] = {}
        for number, parts in written.items():
            recorded.setdefault(number, set()).update(parts)
        for number, pids in lost.items():
            recorded.setdefault(number, set()).update(pids)
        for span in windows.spans:
            recorded.setdefault(span.window["number"], set()).add(root_pid)
        trigger = windows.trigger
        calls = {pid: n for pid, n in window_calls.items() if n is not None}
        if not isinstance(trigger, MarkerWindows):
            return cls(recorded, calls)
        calls[root_pid] = trigger.calls
        return cls(recorded, calls, trigger.marker, trigger.first_calls())

    @property
    def opened_anywhere(self) -> bool:
        """Some process of the run opened a window."""
        return any(self.recorded.values())

    def never_opened(self, trigger: MarkerWindows, processes: int) -> str:
        """The one line that says no window opened in any of the run's processes."""
        most = max(self.calls.values(), default=0)
        return (
            f"ncompass: warning: window {trigger.marker}:{trigger.first}:{trigger.count} never "
            f"opened in any of the run's {processes} processes: the marker {trigger.marker} "
            f"had at most {most} call{'s' if most != 1 else ''} in one process; nothing was "
            "recorded"
        )

    def silent(self, names: dict[int, str]) -> list[str]:
        """One line per window that some processes recorded and others, which counted the
        marker, did not (their marker never reached the window's first call)."""
        if self.marker is None:
            return []
        lines: list[str] = []
        for number in sorted(self.recorded):
            if not self.recorded[number]:
                continue
            first = self.firsts.get(number, 1)
            silent = sorted(pid for pid in self.calls if pid not in self.recorded[number])
            silent = [pid for pid in silent if self.calls[pid] < first]
            if not silent:
                continue
            who = ", ".join(names.get(pid, str(pid)) for pid in silent)
            they = "it" if len(silent) == 1 else "they"
            if all(self.calls[pid] == 0 for pid in silent):
                why = f"{they} never called {self.marker}"
            else:
                counts = ", ".join(f"{self.calls[pid]}" for pid in silent)
                why = f"{they} called {self.marker} fewer than {first} times ({counts})"
            lines.append(
                f"window {number}: {len(silent)} of {len(self.calls)} processes recorded "
                f"nothing in it ({who}): {why}"
            )
        return lines


def process_names(processes: list[dict[str, Any]]) -> dict[int, str]:
    """Each process's name in a warning: its role, else its command, else its pid."""
    return {
        process["pid"]: str(process.get("role") or process.get("command") or process["pid"])
        for process in processes
    }


__all__ = ["WindowAccount", "process_names"]

"""How long the run's main thread waited for a CPU: the sign of a contended machine.

Linux counts, for every thread, the time it ran and the time it was ready to run but waited
for a CPU (the first two fields of ``/proc/<pid>/task/<tid>/schedstat``). On a quiet machine a
program's main thread waits almost never; when other work takes the cores, every statement
it runs is stretched by waits that have nothing to do with it, and by different amounts. A
timing then says as much about the machine as about the code, which the session and the
summary must say instead of answering with confidence. The sidecar records the main
thread's figures over the run (``cpu_wait``); elsewhere than Linux there are none.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

# typing_extensions' TypedDict: pydantic validates only it on Python < 3.12 (the sidecar's test)
from typing_extensions import TypedDict

# the main thread waited for a CPU at least this share of the run: the machine was contended
CONTENDED_WAIT_SHARE = 0.15


class CpuWaitRecord(TypedDict):
    """The sidecar's ``cpu_wait``: seconds the main thread ran, waited for a CPU, and the wall
    time they were measured over."""

    ran_s: float
    waited_s: float
    wall_s: float


@dataclass(frozen=True)
class _Reading:
    ran_ns: int
    waited_ns: int
    wall_s: float


def _main_thread_schedstat() -> tuple[int, int] | None:
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat", "rb") as stream:
            ran, waited = stream.read().split()[:2]
        return int(ran), int(waited)
    except (OSError, ValueError):
        return None  # not Linux, or a kernel without scheduler statistics


class CpuWaitClock:
    """Measures, from :meth:`start` to :meth:`stop`, how the main thread shared the CPU."""

    def __init__(self) -> None:
        self._start: _Reading | None = None

    def start(self) -> None:
        self._start = _read()

    def stop(self) -> CpuWaitRecord | None:
        """What the main thread did since :meth:`start` (None where it cannot be known)."""
        end = _read()
        if self._start is None or end is None:
            return None
        return {
            "ran_s": (end.ran_ns - self._start.ran_ns) / 1e9,
            "waited_s": (end.waited_ns - self._start.waited_ns) / 1e9,
            "wall_s": end.wall_s - self._start.wall_s,
        }


def _read() -> _Reading | None:
    figures = _main_thread_schedstat()
    if figures is None:
        return None
    return _Reading(figures[0], figures[1], time.perf_counter())


def waited_share(record: CpuWaitRecord | None) -> float | None:
    """The share of the measured wall time the main thread spent waiting for a CPU."""
    if not record or record.get("wall_s", 0) <= 0:
        return None
    return min(1.0, max(0.0, record["waited_s"] / record["wall_s"]))


__all__ = ["CONTENDED_WAIT_SHARE", "CpuWaitClock", "CpuWaitRecord", "waited_share"]

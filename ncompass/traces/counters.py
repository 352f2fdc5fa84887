"""Add counter tracks to a written trace in one streaming pass.

``ncompass run --gpu-monitor`` puts its samples into the run's own trace. Where they go (the
process holding the markers, the clock offset) is only known once the whole trace was read,
and they go at its end: so :func:`append_counter_tracks` copies the trace event by event while
finding that out, then asks for the counter events, appends them and moves the copy over the
original. Memory holds the markers' spans, never the trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncompass.traces.events import MARKER_CATEGORY, Event
from ncompass.traces.reader import TraceReader
from ncompass.traces.writer import TraceWriter


@dataclass
class CounterPlacement:
    """Where counter tracks go in one trace, and what they are drawn against.

    Attributes:
        pid: The process holding the first marker; without markers, one past the largest
            integer pid (a new process, which then needs a name: ``new_process``).
        new_process: Whether ``pid`` is a process the trace does not have yet.
        clock_offset_us: ``-baseTimeNanoseconds / 1000`` (0 without it): added to wall-clock
            microseconds, it gives the trace's time axis.
        marker_ranges: ``(name, start_us, end_us)`` of every complete marker event.
    """

    pid: int | str
    new_process: bool
    clock_offset_us: float
    marker_ranges: list[tuple[str, float, float]] = field(default_factory=list)


class _PlacementFinder:
    """Accumulates a :class:`CounterPlacement` over the batches of one trace."""

    def __init__(self, category: str) -> None:
        self.category = category
        self.marker_pid: int | str | None = None
        self.largest_pid: int | None = None
        self.ranges: list[tuple[str, float, float]] = []

    def observe(self, batch: list[Event]) -> None:
        for event in batch:
            pid = event.get("pid")
            if isinstance(pid, int) and not isinstance(pid, bool):
                self.largest_pid = pid if self.largest_pid is None else max(self.largest_pid, pid)
            if event.get("cat") != self.category:
                continue
            if self.marker_pid is None:
                self.marker_pid = pid
            if event.get("ph") == "X" and "dur" in event:
                start = float(event["ts"])
                self.ranges.append((str(event["name"]), start, start + float(event["dur"])))

    def placement(self, metadata: dict[str, Any]) -> CounterPlacement:
        base_ns = metadata.get("baseTimeNanoseconds")
        offset = -float(base_ns) / 1000.0 if base_ns is not None else 0.0
        if self.marker_pid is not None:
            return CounterPlacement(self.marker_pid, False, offset, self.ranges)
        return CounterPlacement((self.largest_pid or 0) + 1, True, offset, self.ranges)


def counter_placement(path: str | Path, *, category: str = MARKER_CATEGORY) -> CounterPlacement:
    """Read ``path`` once for where its counter tracks go (see :class:`CounterPlacement`).

    Raises:
        TraceError: the trace is missing or corrupt.
    """
    reader = TraceReader(path, progress=False)
    finder = _PlacementFinder(category)
    for batch in reader.batches():
        finder.observe(batch)
    return finder.placement(reader.metadata)


def append_counter_tracks(
    path: str | Path,
    events_for: Callable[[CounterPlacement], Iterable[Event]],
    *,
    category: str = MARKER_CATEGORY,
) -> tuple[CounterPlacement, int]:
    """Rewrite the trace at ``path`` with ``events_for(placement)`` after its own events.

    One pass: the copy is written beside the trace while the placement is found, the new
    events are appended, and the copy is moved over the trace once complete (a failure leaves
    the original as it was). Keys written after the events (Kineto's ``baseTimeNanoseconds``)
    stay after them.

    Returns:
        The placement, and how many events were added.

    Raises:
        TraceError: the trace is missing or corrupt, or cannot be written.
    """
    source = Path(path)
    reader = TraceReader(source, progress=False)
    finder = _PlacementFinder(category)
    batches = reader.batches()
    first = next(batches, [])  # from here on the metadata holds the keys before the events
    header = dict(reader.metadata)
    with TraceWriter(source, metadata=header) as writer:
        finder.observe(first)
        writer.write_many(first)
        for batch in batches:
            finder.observe(batch)
            writer.write_many(batch)
        placement = finder.placement(reader.metadata)
        added = list(events_for(placement))
        writer.write_many(added)
        writer.close({key: value for key, value in reader.metadata.items() if key not in header})
    return placement, len(added)


__all__ = ["CounterPlacement", "append_counter_tracks", "counter_placement"]

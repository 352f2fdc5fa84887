"""Add counter tracks to a written trace, streaming: where they go, then the trace plus them.

``ncompass run --gpu-monitor`` puts its samples into the run's own trace. :func:`counter_placement`
reads the trace once for what that needs (the process holding the markers, the clock offset,
the markers' spans); :func:`append_events` then copies the trace with the new events at the
end and moves the copy over the original. Memory holds the markers' spans, never the trace.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

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


def counter_placement(path: str | Path, *, category: str = MARKER_CATEGORY) -> CounterPlacement:
    """Read ``path`` once for where its counter tracks go (see :class:`CounterPlacement`).

    Raises:
        TraceError: the trace is missing or corrupt.
    """
    reader = TraceReader(path, progress=False)
    marker_pid: int | str | None = None
    largest_pid: int | None = None
    ranges: list[tuple[str, float, float]] = []
    for batch in reader.batches():
        for event in batch:
            pid = event.get("pid")
            if isinstance(pid, int) and not isinstance(pid, bool):
                largest_pid = pid if largest_pid is None else max(largest_pid, pid)
            if event.get("cat") != category:
                continue
            if marker_pid is None:
                marker_pid = pid
            if event.get("ph") == "X" and "dur" in event:
                start = float(event["ts"])
                ranges.append((str(event["name"]), start, start + float(event["dur"])))
    base_ns = reader.metadata.get("baseTimeNanoseconds")
    offset = -float(base_ns) / 1000.0 if base_ns is not None else 0.0
    if marker_pid is not None:
        return CounterPlacement(marker_pid, False, offset, ranges)
    return CounterPlacement((largest_pid or 0) + 1, True, offset, ranges)


def append_events(path: str | Path, events: Iterable[Event]) -> int:
    """Rewrite the trace at ``path`` with ``events`` after its own; return how many were added.

    The copy is written beside the trace and moved over it once complete, so a failure leaves
    the original as it was.

    Raises:
        TraceError: the trace is missing or corrupt, or cannot be written.
    """
    source = Path(path)
    added = list(events)
    reader = TraceReader(source, progress=False)
    batches = reader.batches()
    first = next(batches, [])  # from here on the metadata holds the keys before the events
    header = dict(reader.metadata)
    with TraceWriter(source, metadata=header) as writer:
        writer.write_many(first)
        for batch in batches:
            writer.write_many(batch)
        writer.write_many(added)
        # keys written after the events (Kineto's baseTimeNanoseconds) stay after them
        writer.close({key: value for key, value in reader.metadata.items() if key not in header})
    return len(added)


__all__ = ["CounterPlacement", "append_events", "counter_placement"]

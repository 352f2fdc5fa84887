"""Lanes for slices that overlap without nesting, so a trace viewer shows every one of them.

Perfetto and chrome://tracing draw the complete (``X``) events of one thread as a stack: a slice
that starts inside another must also end inside it. Real data breaks that: two kernels on one
stream overlap by a few hundred nanoseconds (the GPU starts the next one before the previous
one's end is timestamped), NVTX ranges of two domains interleave on one thread, a range that
never ended runs to the end of the report. A viewer then drops or truncates slices.

:class:`LaneLayout` gives each slice, visited in start order, the first lane where it nests
properly (at any depth); the caller draws lane 0 on the track itself and lane *k* on an extra
track next to it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ncompass.traces.events import OVERLAP_OF_KEY

_OVERLAP_TID_BASE = 1 << 24  # above any Linux tid


class LaneLayout:
    """Assigns the slices of one track to lanes, in start order.

    Slices must be visited by start time, the longer first among those that start together
    (the order :func:`~ncompass.traces.nsys.records.thread_order` gives). Memory grows with the
    number of slices open at one time, not with the number of slices.
    """

    def __init__(self) -> None:
        # Per lane, the end times of the slices still open there, outermost first.
        self._open: list[list[int]] = []

    @property
    def lane_count(self) -> int:
        """How many lanes have been used (at least 1 once a slice was placed)."""
        return len(self._open)

    def place(self, start: int, end: int) -> int:
        """The lane of the slice ``[start, end]``: the first one where it nests properly.

        Args:
            start: Its start; never earlier than the previous slice's start.
            end: Its end (``>= start``).

        Returns:
            The lane index (0 for the track itself).
        """
        for lane, open_ends in enumerate(self._open):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()  # ended before this slice starts
            if not open_ends or end <= open_ends[-1]:
                open_ends.append(end)
                return lane
        self._open.append([end])
        return len(self._open) - 1


def spread_overlapping_slices(events: list[dict[str, Any]]) -> int:
    """Move complete events that overlap without nesting to overlap tracks, in place.

    For a trace held in memory (the NVTX recorder's): each thread's ``X`` events are laid out
    with :class:`LaneLayout`; lane *k* becomes a new thread of the same process, named after
    the thread with `` · overlap k`` (a ``thread_name`` event is appended for it, whose
    ``args`` name the thread under :data:`~ncompass.traces.events.OVERLAP_OF_KEY`).

    Args:
        events: Chrome trace events; changed in place.

    Returns:
        How many overlap tracks were added.
    """
    tracks: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    names: dict[tuple[Any, Any], str] = {}
    for event in events:
        phase = event.get("ph")
        if phase == "X":
            tracks[(event.get("pid"), event.get("tid"))].append(event)
        elif phase == "M" and event.get("name") == "thread_name":
            names[(event.get("pid"), event.get("tid"))] = str(event["args"]["name"])
    added: list[dict[str, Any]] = []
    for (pid, tid), slices in tracks.items():
        slices.sort(key=lambda e: (_nanoseconds(e["ts"]), -_nanoseconds(e.get("dur", 0))))
        layout = LaneLayout()
        lane_tids: dict[int, int] = {}
        for event in slices:
            start = _nanoseconds(event["ts"])
            lane = layout.place(start, start + _nanoseconds(event.get("dur", 0)))
            if lane:
                if lane not in lane_tids:
                    lane_tids[lane] = _OVERLAP_TID_BASE + len(added) + 1
                    base = names.get((pid, tid), f"thread {tid}")
                    added.append(
                        {
                            "ph": "M",
                            "name": "thread_name",
                            "pid": pid,
                            "tid": lane_tids[lane],
                            "args": {"name": f"{base} · overlap {lane}", OVERLAP_OF_KEY: tid},
                        }
                    )
                event["tid"] = lane_tids[lane]
    events.extend(added)
    return len(added)


def _nanoseconds(microseconds: Any) -> int:
    return round(float(microseconds) * 1000)


__all__ = ["LaneLayout", "spread_overlapping_slices"]

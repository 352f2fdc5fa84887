"""GPU idle gaps and why they happened: was the GPU waiting for the host to launch work?"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ncompass.analysis import _native
from ncompass.traces.link import NO_LINK, LinkedTrace, marker_group

_LARGEST_KEPT = 5


@dataclass(frozen=True)
class IdleGap:
    """One interval in which no GPU event of the rank ran.

    Attributes:
        start: When the GPU went idle (the trace's own timestamp, µs).
        duration: How long it stayed idle (µs).
        host_bound: True when the next event's launch started at or after ``start`` (the GPU
            waited for the host); False when it was launched before (queued behind something
            else); None when that event has no launch in the trace.
        next_event: Name of the GPU event that ended the gap.
        marker: The marker that launched it, when known.
    """

    start: float
    duration: float
    host_bound: bool | None
    next_event: str
    marker: str | None

    @property
    def end(self) -> float:
        """When the next GPU event started (µs)."""
        return self.start + self.duration

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "start_us": self.start,
            "duration_us": self.duration,
            "host_bound": self.host_bound,
            "next_event": self.next_event,
            "marker": self.marker,
        }


@dataclass(frozen=True)
class IdleGaps:
    """Idle gaps of one rank, totalled by cause, with the largest ones."""

    count: int = 0
    total_us: float = 0.0
    host_bound_count: int = 0
    host_bound_us: float = 0.0
    not_host_bound_count: int = 0
    not_host_bound_us: float = 0.0
    unknown_count: int = 0
    unknown_us: float = 0.0
    largest: tuple[IdleGap, ...] = field(default_factory=tuple)
    host_bound_us_by_marker: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "count": self.count,
            "total_us": self.total_us,
            "host_bound_count": self.host_bound_count,
            "host_bound_us": self.host_bound_us,
            "not_host_bound_count": self.not_host_bound_count,
            "not_host_bound_us": self.not_host_bound_us,
            "unknown_count": self.unknown_count,
            "unknown_us": self.unknown_us,
            "host_bound_us_by_marker": dict(self.host_bound_us_by_marker),
            "largest": [gap.to_dict() for gap in self.largest],
        }


def classify_idle_gaps(trace: LinkedTrace, by_start: Sequence[int]) -> IdleGaps:
    """Find the gaps between GPU events and classify each by the launch of the event after it.

    Args:
        trace: The linked trace.
        by_start: Indices of the GPU events to consider, sorted by start time.

    Returns:
        The gaps, totalled as host-bound, not host-bound and unknown.
    """
    sweep, (usable, column) = _native.sweep, _native.sweep_order(by_start, len(trace.gpu))
    if sweep is not None and usable:
        return _swept_in_c(sweep, trace, column)
    return _swept_in_python(trace, by_start)


def _swept_in_python(trace: LinkedTrace, by_start: Sequence[int]) -> IdleGaps:
    gpu_start, gpu_duration, gpu_launch = trace.gpu.start, trace.gpu.duration, trace.gpu.launch
    launch_start, launch_marker = trace.launches.start, trace.launches.marker
    counts: dict[bool | None, int] = {True: 0, False: 0, None: 0}
    durations: dict[bool | None, float] = {True: 0.0, False: 0.0, None: 0.0}
    by_marker: dict[str, float] = {}
    marker_groups: dict[int, str] = {}  # marker index -> its group name
    # A min-heap of the biggest gaps as (duration, next event, idle since): an IdleGap is only
    # built for the few kept, not for each of a trace's (possibly millions of) gaps.
    largest: list[tuple[float, int, float]] = []
    busy_until = infinity = float("inf")
    for index in by_start:
        start = gpu_start[index]
        if start > busy_until:
            duration = start - busy_until
            launch = gpu_launch[index]
            host_bound = None if launch == NO_LINK else launch_start[launch] >= busy_until
            counts[host_bound] += 1
            durations[host_bound] += duration
            if host_bound and launch_marker[launch] != NO_LINK:
                marker_index = launch_marker[launch]
                marker = marker_groups.get(marker_index)
                if marker is None:
                    marker = marker_group(trace.markers[marker_index].name)
                    marker_groups[marker_index] = marker
                by_marker[marker] = by_marker.get(marker, 0.0) + duration
            entry = (duration, index, busy_until)
            if len(largest) < _LARGEST_KEPT:
                heapq.heappush(largest, entry)
            elif entry > largest[0]:  # indices differ: the third item is never compared
                heapq.heapreplace(largest, entry)
        end = start + gpu_duration[index]
        if end > busy_until or busy_until == infinity:
            busy_until = end
    return _idle_gaps(
        trace,
        (counts[True], counts[False], counts[None]),
        (durations[True], durations[False], durations[None]),
        by_marker,
        sorted(largest, reverse=True),
    )


def _swept_in_c(sweep: ModuleType, trace: LinkedTrace, by_start: array[int] | None) -> IdleGaps:
    """The same sweep in C; marker groups are named here, once per marker the gaps meet."""
    group_names: list[str] = []
    group_ids: dict[str, int] = {}

    def group_of(marker_index: int) -> int:
        name = marker_group(trace.markers[marker_index].name)
        if name not in group_ids:  # ids in the order the gaps first meet each group
            group_ids[name] = len(group_names)
            group_names.append(name)
        return group_ids[name]

    gpu, launches = trace.gpu, trace.launches
    host, not_host, unknown, group_totals, largest = sweep.idle_gaps(
        gpu.start,
        gpu.duration,
        gpu.launch,
        launches.start,
        launches.marker,
        by_start,
        group_of,
        _LARGEST_KEPT,
    )
    by_group = _native.doubles(group_totals)
    return _idle_gaps(
        trace,
        (host[0], not_host[0], unknown[0]),
        (host[1], not_host[1], unknown[1]),
        {name: by_group[group] for group, name in enumerate(group_names)},
        largest,
    )


def _idle_gaps(
    trace: LinkedTrace,
    counts: tuple[int, int, int],
    durations: tuple[float, float, float],
    by_marker: dict[str, float],
    largest_first: list[tuple[float, int, float]],
) -> IdleGaps:
    """The totals of a sweep (host-bound, not host-bound, unknown) as :class:`IdleGaps`."""
    return IdleGaps(
        count=sum(counts),
        total_us=sum(durations),
        host_bound_count=counts[0],
        host_bound_us=durations[0],
        not_host_bound_count=counts[1],
        not_host_bound_us=durations[1],
        unknown_count=counts[2],
        unknown_us=durations[2],
        largest=tuple(_gap(trace, idle_since, index) for _, index, idle_since in largest_first),
        host_bound_us_by_marker=dict(sorted(by_marker.items(), key=lambda item: -item[1])),
    )


def _marker_name(trace: LinkedTrace, launch: int) -> str | None:
    """The group name of the marker a launch ran in, when it ran in one."""
    marker = trace.launches.marker[launch]
    return None if marker == NO_LINK else marker_group(trace.markers[marker].name)


def _gap(trace: LinkedTrace, idle_since: float, next_index: int) -> IdleGap:
    gpu = trace.gpu
    launch = gpu.launch[next_index]
    host_bound: bool | None = None
    marker_name: str | None = None
    if launch != NO_LINK:
        host_bound = trace.launches.start[launch] >= idle_since
        marker_name = _marker_name(trace, launch)
    return IdleGap(
        start=trace.origin_us + idle_since,
        duration=gpu.start[next_index] - idle_since,
        host_bound=host_bound,
        next_event=trace.names[gpu.name[next_index]],
        marker=marker_name,
    )

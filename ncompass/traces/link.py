"""One streaming pass over a trace that keeps what analysis needs, then links it together.

What is kept grows with the markers, the CPU-side launches and the GPU events (stored as compact
columns), not with the file: CPU operators are folded into per-name aggregates on the fly.

Linking follows docs/architecture.md "Trace analysis contracts": a GPU event belongs to the CPU
launch with the same ``args.correlation`` (flow events are not needed); a launch belongs to the
innermost marker (``user_annotation``) that encloses its start on the same thread.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Collection, Sequence
from pathlib import Path

from ncompass.traces._collector import (
    INDEX,
    KERNEL_CLASSES,
    NO_LINK,
    Collector,
    GpuEvents,
    LaunchCalls,
    LinkedTrace,
    Marker,
    OperatorTotals,
    encloses,
    fold_path,
    marker_group,
)
from ncompass.traces._split import fold_in_parts
from ncompass.traces.reader import TraceReader

try:
    from ncompass.traces import _fold
except ImportError:  # built without a C compiler: linking with dicts and lists does the same
    _fold = None  # type: ignore[assignment]

__all__ = [
    "KERNEL_CLASSES",
    "NO_LINK",
    "GpuEvents",
    "LaunchCalls",
    "LinkedTrace",
    "Marker",
    "OperatorTotals",
    "encloses",
    "fold_path",
    "link_trace",
    "marker_group",
]


def link_trace(
    path: str | Path, *, progress: bool | None = None, jobs: int | None = 1
) -> LinkedTrace:
    """Read a trace once and link its GPU events, launches and markers.

    Args:
        path: A ``.json`` or ``.json.gz`` Chrome/Kineto trace.
        progress: Progress bar on stderr (None: only on a terminal, for large files).
        jobs: Processes that read one large plain-JSON trace at once, each a part of it (None:
            one per core); smaller and gzip-compressed traces are read in one pass. The result
            is the same either way.

    Returns:
        The linked trace.

    Raises:
        TraceError: The file is missing, truncated or not a trace, or an event in it holds a
            value linking cannot use (a :class:`~ncompass.traces.reader.TraceValueError`).
    """
    trace = fold_in_parts(Path(path), jobs, progress) if jobs != 1 else None
    if trace is None:
        reader = TraceReader(path, progress=progress)
        collector = Collector(LinkedTrace(Path(path)))
        for batch in reader.link_batches():
            collector.add(batch)
        trace = collector.finish()
        trace.metadata = reader.metadata
        del collector, reader  # their buffers and tables, before linking allocates
    _link_gpu_events_to_launches(trace)
    _link_launches_and_markers(trace)
    return trace


def _link_gpu_events_to_launches(trace: LinkedTrace) -> None:
    gpu = trace.gpu
    gpu.launch = array(INDEX, [NO_LINK]) * len(gpu)
    if _fold is not None and _fold.link_correlations(  # the same, 12-20 bytes a GPU event
        gpu.correlation, trace.launches.correlation, gpu.launch, NO_LINK
    ):
        return
    by_correlation = {
        correlation: index
        for index, correlation in enumerate(gpu.correlation)
        if correlation != NO_LINK
    }
    if len(by_correlation) < len(gpu):
        # Several GPU events may share a correlation (a graph launch): link all of them.
        shared: dict[int, list[int]] = defaultdict(list)
        for index, correlation in enumerate(gpu.correlation):
            if correlation != NO_LINK and by_correlation[correlation] != index:
                shared[correlation].append(index)
    else:
        shared = {}
    for launch_index, correlation in enumerate(trace.launches.correlation):
        gpu_index = by_correlation.get(correlation)
        if gpu_index is not None:
            gpu.launch[gpu_index] = launch_index
            for other in shared.get(correlation, ()):
                gpu.launch[other] = launch_index


def _link_launches_and_markers(trace: LinkedTrace) -> None:
    """Sweep each thread in time order: markers nest, launches go to the innermost open one."""
    launches = trace.launches
    launches.marker = array(INDEX, [NO_LINK]) * len(launches)
    markers_by_thread: dict[int, list[int]] = defaultdict(list)
    for index, marker in enumerate(trace.markers):
        markers_by_thread[marker.thread].append(index)
    if not markers_by_thread:
        return
    launches_by_thread = _launches_in_time_order(launches, markers_by_thread.keys())
    markers = trace.markers
    bounds = _marker_bounds(markers) if _fold is not None else None
    for thread, marker_indices in markers_by_thread.items():
        # Outer ranges first when two start together, so the inner one ends up on top: by
        # (start, -end), as two stable sorts on one number each, whose keys cost a float or
        # nothing (a start is the marker's own) where a tuple key cost 100 bytes a marker.
        marker_indices.sort(key=lambda index: -markers[index].end)
        marker_indices.sort(key=lambda index: markers[index].start)
        launch_indices = launches_by_thread[thread]
        stack: list[int] = []
        next_launch = 0
        overlapping = False  # whether ranges on this thread overlap without nesting
        for marker_index in marker_indices:
            marker = markers[marker_index]
            next_launch = _assign_launches(
                trace, stack, launch_indices, next_launch, marker.start, overlapping, bounds
            )
            _pop_ended(markers, stack, marker.start)
            enclosing = _innermost_enclosing(markers, stack, marker.start, marker.end)
            if enclosing != NO_LINK:
                marker.parent = enclosing
                markers[enclosing].nested_us += marker.duration
            overlapping = overlapping or (bool(stack) and stack[-1] != enclosing)
            stack.append(marker_index)
        _assign_launches(
            trace, stack, launch_indices, next_launch, float("inf"), overlapping, bounds
        )


def _launches_in_time_order(
    launches: LaunchCalls, threads: Collection[int]
) -> dict[int, Sequence[int]]:
    """Each thread's launch indices in order of start (ties in file order)."""
    if _fold is not None:  # 8 bytes a launch, not a Python int, a list slot and a sort key
        ordered: dict[int, Sequence[int]] = {}
        for thread in threads:
            indices = array("l", [0]) * _fold.launches_on_thread(launches.thread, thread)
            if not _fold.launches_in_time_order(launches.thread, launches.start, thread, indices):
                break  # a NaN start: where it goes is Python's sort's to say
            ordered[thread] = indices
        else:
            return ordered
    by_thread: dict[int, list[int]] = defaultdict(list)
    for index, thread in enumerate(launches.thread):
        if thread in threads:
            by_thread[thread].append(index)
    return {
        thread: sorted(by_thread.get(thread, ()), key=launches.start.__getitem__)
        for thread in threads
    }


def _marker_bounds(markers: list[Marker]) -> tuple[array[float], array[float]]:
    """Each marker's start and end as columns, for the C sweep."""
    return array("d", [marker.start for marker in markers]), array(
        "d", [marker.end for marker in markers]
    )


def _assign_launches(
    trace: LinkedTrace,
    stack: list[int],
    launch_indices: Sequence[int],
    next_launch: int,
    until: float,
    overlapping: bool,
    bounds: tuple[array[float], array[float]] | None = None,
) -> int:
    launches = trace.launches
    markers = trace.markers
    if bounds is not None and not overlapping and isinstance(launch_indices, array):
        # the same sweep in C, where ranges nest (no launch is inside two unrelated ones)
        return int(
            _fold.assign_launches(
                launches.start, launches.marker, launch_indices, next_launch, until, stack, *bounds
            )
        )
    while next_launch < len(launch_indices):
        launch = launch_indices[next_launch]
        start = launches.start[launch]
        if start >= until:
            break
        _pop_ended(markers, stack, start)
        innermost = _innermost_enclosing(markers, stack, start, start)
        launches.marker[launch] = innermost
        if overlapping and innermost != NO_LINK:
            others = _other_enclosing(markers, stack, innermost, start)
            if others:
                launches.also_inside[launch] = others
        next_launch += 1
    return next_launch


def _other_enclosing(
    markers: list[Marker], stack: list[int], innermost: int, time: float
) -> list[int]:
    """The open markers around ``time`` that are neither ``innermost`` nor its parents."""
    lineage = set()
    index = innermost
    while index != NO_LINK:
        lineage.add(index)
        index = markers[index].parent
    return [
        index
        for index in stack
        if index not in lineage and encloses(markers[index].start, markers[index].end, time, time)
    ]


def _pop_ended(markers: list[Marker], stack: list[int], time: float) -> None:
    while stack and markers[stack[-1]].end < time:
        stack.pop()


def _innermost_enclosing(markers: list[Marker], stack: list[int], start: float, end: float) -> int:
    for index in reversed(stack):
        candidate = markers[index]
        if encloses(candidate.start, candidate.end, start, end):
            return index
    return NO_LINK

"""The run as a picture: busy time over the run, binned, with the top-level markers as lanes.

Bounded whatever the trace's size: ``COLUMNS`` bins for the busy row, at most ``LANES`` lanes,
and each lane's ranges merged to at most one per bin.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from ncompass.analysis import _native
from ncompass.analysis.breakdown import ALL_CLASSES, in_start_order, measured_union, merged_union
from ncompass.analysis.intervals import Interval, IntervalColumns, total_length, union
from ncompass.analysis.summary_types import Timeline
from ncompass.traces.identity import run_processes
from ncompass.traces.link import KERNEL_CLASSES, NO_LINK, GpuEvents, LinkedTrace, marker_group

COLUMNS = 600
LANES = 8


def busy_timeline(trace: LinkedTrace, *, columns: int = COLUMNS, lanes: int = LANES) -> Timeline:
    """GPU busy time (CPU time inside markers when there is no GPU work) per bin of the run, and
    where the top-level markers ran.

    Args:
        trace: A linked trace.
        columns: Bins over the run.
        lanes: Most marker lanes kept (the top-level marker names with the most time).

    Returns:
        ``{"source": "gpu"|"cpu", "start_us", "end_us", "columns", "busy": [fraction per bin],
        "lanes": [{"name", "calls", "total_us", "ranges": [[first, last], ...]}]}``; ranges are
        in bins (fractional), merged where closer than one bin; empty without events.
    """
    gpu = trace.gpu
    by_start = in_start_order(gpu.start, range(len(gpu)))
    # measured, then binned, as the union merges: no column of the busy intervals (16 bytes each)
    merged, _, first_start, last_end = measured_union(gpu, by_start, ALL_CLASSES)
    markers = trace.markers
    source: Literal["gpu", "cpu"] = "gpu" if merged else "cpu"
    cpu_busy = None
    if not merged:
        cpu_busy = IntervalColumns.of(union((marker.start, marker.end) for marker in markers))
        if cpu_busy:
            first_start, last_end = cpu_busy.starts[0], cpu_busy.ends[-1]
    begin, end = _span(trace, (first_start, last_end) if merged or cpu_busy else None)
    result: Timeline = {
        "source": source,
        "start_us": begin,
        "end_us": end,
        "columns": columns,
        "busy": [],
        "lanes": [],
    }
    if end <= begin:
        return result
    scale = columns / (end - begin)
    if cpu_busy is None:
        covered = _gpu_coverage(gpu, by_start, begin, scale, columns)
    else:
        covered = _coverage(cpu_busy, begin, scale, columns)
    del by_start
    result["busy"] = [round(min(1.0, share), 3) for share in covered]
    top_level: dict[str, list[Interval]] = defaultdict(list)
    # A run's merged trace: one lane per process and marker, so two ranks' lanes stay apart.
    processes = run_processes(trace.metadata)
    roles = {process.pid: process.role for process in processes} if len(processes) > 1 else {}
    threads = trace.threads
    for marker in markers:
        if marker.parent == NO_LINK:
            name = marker_group(marker.name)
            if roles:
                pid = threads[marker.thread][0]
                name = f"{roles.get(pid, pid)}: {name}"
            top_level[name].append((marker.start, marker.end))
    ranked = sorted(top_level.items(), key=lambda item: -total_length(union(item[1])))
    result["lanes"] = [
        {
            "name": name,
            "calls": len(ranges),
            "total_us": sum(stop - start for start, stop in ranges),
            "ranges": _bins(union(ranges), begin, scale),
        }
        for name, ranges in ranked[:lanes]
    ]
    return result


def _span(trace: LinkedTrace, busy: tuple[float, float] | None) -> tuple[float, float]:
    """From the first to the last event, CPU or GPU (0, 0 without events); ``busy`` is the first
    start and the last end of the busy intervals, None without any."""
    starts = [busy[0]] if busy is not None else []
    ends = [busy[1]] if busy is not None else []
    if trace.cpu_end > trace.cpu_start:
        starts.append(trace.cpu_start)
        ends.append(trace.cpu_end)
    return (min(starts), max(ends)) if starts else (0.0, 0.0)


def _gpu_coverage(
    gpu: GpuEvents, by_start: Sequence[int], begin: float, scale: float, columns: int
) -> list[float]:
    """:func:`_coverage` of the union of the GPU events, swept in C where it can be."""
    sweep, (usable, column) = _native.sweep, _native.sweep_order(by_start, len(gpu))
    if sweep is not None and usable:
        arguments = (gpu.start, gpu.duration, gpu.kernel_class, column, len(KERNEL_CLASSES))
        covered: list[float] | None
        covered = sweep.union_coverage(*arguments, ALL_CLASSES, begin, scale, columns)
        if covered is not None:  # None: a bin that is not finite, which int() judges below
            return covered
    return _coverage(merged_union(gpu, by_start, ALL_CLASSES), begin, scale, columns)


def _coverage(disjoint: IntervalColumns, begin: float, scale: float, columns: int) -> list[float]:
    """How much of each bin ``disjoint`` intervals cover (more than 1.0 only through rounding)."""
    covered = [0.0] * columns
    for start, stop in zip(disjoint.starts, disjoint.ends, strict=True):
        first, last = (start - begin) * scale, (stop - begin) * scale
        column = max(0, int(first))
        while column < columns and column < last:
            covered[column] += min(last, column + 1) - max(first, column)
            column += 1
    return covered


def _bins(disjoint: Sequence[Interval], begin: float, scale: float) -> list[list[float]]:
    """Intervals in bins, merged where the gap between them is under one bin."""
    merged: list[list[float]] = []
    for start, stop in disjoint:
        first, last = (start - begin) * scale, (stop - begin) * scale
        if merged and first - merged[-1][1] < 1.0:
            merged[-1][1] = last
        else:
            merged.append([first, last])
    return [[round(first, 2), round(last, 2)] for first, last in merged]

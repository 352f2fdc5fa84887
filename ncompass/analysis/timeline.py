"""The run as a picture: busy time over the run, binned, with the top-level markers as lanes.

Bounded whatever the trace's size: ``COLUMNS`` bins for the busy row, at most ``LANES`` lanes,
and each lane's ranges merged to at most one per bin.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from ncompass.analysis.breakdown import ALL_CLASSES, in_start_order, merged_union
from ncompass.analysis.intervals import Interval, IntervalColumns, total_length, union
from ncompass.analysis.summary_types import Timeline
from ncompass.traces.link import NO_LINK, LinkedTrace, marker_group

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
    # as columns, merged in start order: a (start, end) tuple per GPU event took ~110 bytes each
    gpu_busy = merged_union(gpu, in_start_order(gpu.start, range(len(gpu))), ALL_CLASSES)
    markers = trace.markers
    source: Literal["gpu", "cpu"] = "gpu" if gpu_busy else "cpu"
    busy = gpu_busy or IntervalColumns.of(union((marker.start, marker.end) for marker in markers))
    begin, end = _span(trace, busy)
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
    result["busy"] = [round(share, 3) for share in _coverage(busy, begin, scale, columns)]
    top_level: dict[str, list[Interval]] = defaultdict(list)
    for marker in markers:
        if marker.parent == NO_LINK:
            top_level[marker_group(marker.name)].append((marker.start, marker.end))
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


def _span(trace: LinkedTrace, busy: IntervalColumns) -> tuple[float, float]:
    """From the first to the last event, CPU or GPU (0, 0 without events)."""
    starts = [busy.starts[0]] if busy else []
    ends = [busy.ends[-1]] if busy else []
    if trace.cpu_end > trace.cpu_start:
        starts.append(trace.cpu_start)
        ends.append(trace.cpu_end)
    return (min(starts), max(ends)) if starts else (0.0, 0.0)


def _coverage(disjoint: IntervalColumns, begin: float, scale: float, columns: int) -> list[float]:
    """The share of each bin covered by ``disjoint`` intervals."""
    covered = [0.0] * columns
    for start, stop in zip(disjoint.starts, disjoint.ends, strict=True):
        first, last = (start - begin) * scale, (stop - begin) * scale
        column = max(0, int(first))
        while column < columns and column < last:
            covered[column] += min(last, column + 1) - max(first, column)
            column += 1
    return [min(1.0, share) for share in covered]


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

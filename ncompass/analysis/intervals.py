"""Unions and intersections of time intervals (microseconds), the arithmetic of breakdowns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Merge overlapping or touching intervals.

    Args:
        intervals: ``(start, end)`` pairs in any order.

    Returns:
        Disjoint intervals sorted by start.
    """
    return merge_sorted(sorted(intervals))


def merge_sorted(intervals: Iterable[Interval]) -> list[Interval]:
    """Like :func:`union`, for intervals already sorted by start (streams them, no copy).

    Args:
        intervals: ``(start, end)`` pairs in order of start.

    Returns:
        Disjoint intervals sorted by start.
    """
    merged: list[Interval] = []
    current_start = current_end = 0.0
    started = False
    for start, end in intervals:
        if not started:
            current_start, current_end, started = start, end, True
        elif start <= current_end:
            if end > current_end:
                current_end = end
        else:
            merged.append((current_start, current_end))
            current_start, current_end = start, end
    if started:
        merged.append((current_start, current_end))
    return merged


def total_length(disjoint: Iterable[Interval]) -> float:
    """Sum of the lengths of disjoint intervals."""
    return sum((end - start for start, end in disjoint), 0.0)


def intersection_length(first: Sequence[Interval], second: Sequence[Interval]) -> float:
    """Length of the overlap of two sorted lists of disjoint intervals."""
    total = 0.0
    i = j = 0
    while i < len(first) and j < len(second):
        start = max(first[i][0], second[j][0])
        end = min(first[i][1], second[j][1])
        if end > start:
            total += end - start
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return total


def gaps(disjoint: Sequence[Interval]) -> list[Interval]:
    """The holes between consecutive sorted disjoint intervals."""
    return [
        (disjoint[index][1], disjoint[index + 1][0])
        for index in range(len(disjoint) - 1)
        if disjoint[index + 1][0] > disjoint[index][1]
    ]

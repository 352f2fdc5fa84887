"""Unions and intersections of time intervals (microseconds), the arithmetic of breakdowns."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

Interval = tuple[float, float]


@dataclass
class IntervalColumns:
    """Disjoint intervals sorted by start, as two columns of floats: 16 bytes an interval, where
    a list of ``(start, end)`` tuples costs about 100 (a trace can hold millions)."""

    starts: array[float] = field(default_factory=lambda: array("d"))
    ends: array[float] = field(default_factory=lambda: array("d"))

    @classmethod
    def of(cls, disjoint: Iterable[Interval]) -> IntervalColumns:
        """Columns of ``(start, end)`` pairs already disjoint and sorted."""
        columns = cls()
        for start, end in disjoint:
            columns.starts.append(start)
            columns.ends.append(end)
        return columns

    @classmethod
    def of_bytes(cls, starts: bytes, ends: bytes) -> IntervalColumns:
        """Columns from the machine doubles of the starts and of the ends."""
        columns = cls()
        columns.starts.frombytes(starts)
        columns.ends.frombytes(ends)
        return columns

    def __len__(self) -> int:
        return len(self.starts)

    def span(self) -> float:
        """First start to last end (0.0 when empty)."""
        return self.ends[-1] - self.starts[0] if self.starts else 0.0

    def total_length(self) -> float:
        """Sum of the lengths, added in the same order as :func:`total_length`."""
        return total_length(zip(self.starts, self.ends, strict=True))


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
    """Sum of the lengths of disjoint intervals, added one after the other in their order (what
    ``sum`` does up to Python 3.11; from 3.12 it compensates rounding, which the C sweeps, adding
    as they merge, would have to copy version by version)."""
    total = 0.0
    for start, end in disjoint:
        total += end - start
    return total


def intersection_length(first: Sequence[Interval], second: Sequence[Interval]) -> float:
    """Length of the overlap of two sorted lists of disjoint intervals."""
    return overlap_length(IntervalColumns.of(first), IntervalColumns.of(second))


def overlap_length(first: IntervalColumns, second: IntervalColumns) -> float:
    """Length of the overlap of two sets of disjoint intervals held as columns."""
    first_starts, first_ends = first.starts, first.ends
    second_starts, second_ends = second.starts, second.ends
    total = 0.0
    i = j = 0
    while i < len(first_starts) and j < len(second_starts):
        start = max(first_starts[i], second_starts[j])
        end = min(first_ends[i], second_ends[j])
        if end > start:
            total += end - start
        if first_ends[i] < second_ends[j]:
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

"""Temporal and kernel-type breakdown of GPU time per rank, as docs/architecture.md defines it.

Per rank (one trace file): ``kernel_span_us`` runs from the first GPU event's start to the last
one's end; ``idle_us`` is the span minus the union of all GPU event intervals; ``compute_us`` is
the union of computation intervals; ``non_compute_us`` is what is left. ``kernel_types`` sums
each class's union over ranks.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from ncompass.analysis import _native
from ncompass.analysis.idle import IdleGaps, classify_idle_gaps
from ncompass.analysis.intervals import IntervalColumns, overlap_length
from ncompass.analysis.launches import LaunchStatistics, launch_statistics
from ncompass.analysis.printable_names import read_printable
from ncompass.analysis.run_parts import (
    is_run_trace,
    marker_cpu_us,
    process_parts,
    rank_parts,
    wall_us,
)
from ncompass.analysis.summary_types import RankBreakdownRow
from ncompass.traces.events import KernelClass
from ncompass.traces.identity import RankOwners
from ncompass.traces.link import (
    KERNEL_CLASSES,
    NO_LINK,
    GpuEvents,
    LinkedTrace,
    marker_group,
)
from ncompass.traces.parallel import map_traces


@dataclass(frozen=True)
class RankBreakdown:
    """Where one rank's GPU time went.

    Attributes:
        rank: The rank the trace names (see :func:`~ncompass.traces.identity.trace_identity`),
            else the file's position on the command line.
        path: The trace file.
        kernel_span_us: First GPU event start to last GPU event end.
        idle_us: Span minus the union of all GPU event intervals.
        compute_us: Union of computation intervals.
        non_compute_us: ``kernel_span_us - idle_us - compute_us``.
        gpu_events: GPU events counted.
        computation_us, communication_us, memory_us: Union of each class's intervals.
        communication_overlapped_us: Communication time that overlapped computation.
        launches: Kernel-launch statistics.
        idle_gaps: Idle gaps classified as host-bound or not.
        window: Which GPU events were counted ("all", or "before the last ProfilerStep").
        run: Per process and per rank, for a run's merged trace of several processes (None
            for any other trace).
    """

    rank: int
    path: str
    kernel_span_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float
    gpu_events: int
    computation_us: float
    communication_us: float
    memory_us: float
    communication_overlapped_us: float
    launches: LaunchStatistics
    idle_gaps: IdleGaps
    window: str
    run: RunBreakdown | None = None

    def to_dict(self) -> RankBreakdownRow:
        """JSON-ready dict: the keys of docs/architecture.md first, then the extras."""
        return {
            "kernel_span_us": self.kernel_span_us,
            "idle_us": self.idle_us,
            "compute_us": self.compute_us,
            "non_compute_us": self.non_compute_us,
            "gpu_events": self.gpu_events,
            "path": self.path,
            "window": self.window,
            "computation_us": self.computation_us,
            "communication_us": self.communication_us,
            "memory_us": self.memory_us,
            "communication_overlapped_us": self.communication_overlapped_us,
            "launches": self.launches.to_dict(),
            "idle_gaps": self.idle_gaps.to_dict(),
        }


@dataclass(frozen=True)
class ProcessBreakdown:
    """One process of a run's merged trace and the breakdown of the part it recorded.

    Attributes:
        pid: Its OS pid.
        role: ``rank 1``, ``DataLoader worker 0``, a command line, ...
        rank: The rank it states (None for a worker).
        under_rank: The rank it is reported under (its own, else its nearest ancestor's).
        wall_us: Its CPU span, first marker or launch to last.
        marker_cpu_us: CPU time inside its outermost markers.
        breakdown: The breakdown of its GPU events (those it launched).
    """

    pid: int
    role: str
    rank: int | None
    under_rank: int | None
    wall_us: float
    marker_cpu_us: float
    breakdown: RankBreakdown

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the process, then its breakdown's keys."""
        return {
            "pid": self.pid,
            "role": self.role,
            "rank": self.rank,
            "under_rank": self.under_rank,
            "wall_us": self.wall_us,
            "marker_cpu_us": self.marker_cpu_us,
            **self.breakdown.to_dict(),
        }


@dataclass(frozen=True)
class RunBreakdown:
    """A run's merged trace broken down per process and per rank (processes under their rank).

    Attributes:
        processes: Every process of the run, root first.
        ranks: Every rank with its processes, in rank order (empty when no process states one).
    """

    processes: tuple[ProcessBreakdown, ...]
    ranks: tuple[RankBreakdown, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``{"processes": [...], "ranks": {"0": {...}, ...}}``."""
        return {
            "processes": [process.to_dict() for process in self.processes],
            "ranks": {str(rank.rank): rank.to_dict() for rank in self.ranks},
        }


@dataclass(frozen=True)
class Breakdown:
    """The breakdown of several ranks, and the kernel-type totals over them."""

    ranks: tuple[RankBreakdown, ...]

    @property
    def computation_us(self) -> float:
        """Union of computation intervals, summed over ranks."""
        return sum(rank.computation_us for rank in self.ranks)

    @property
    def communication_us(self) -> float:
        """Union of communication intervals, summed over ranks."""
        return sum(rank.communication_us for rank in self.ranks)

    @property
    def memory_us(self) -> float:
        """Union of memory intervals, summed over ranks."""
        return sum(rank.memory_us for rank in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``ncompass breakdown --json``: docs/architecture.md's, plus extras."""
        values: dict[str, Any] = {
            "ranks": {str(rank.rank): rank.to_dict() for rank in self.ranks},
            "kernel_types": {
                "computation_us": self.computation_us,
                "communication_us": self.communication_us,
                "memory_us": self.memory_us,
            },
        }
        runs = {str(rank.rank): rank.run.to_dict() for rank in self.ranks if rank.run}
        if runs:  # a run's merged trace: its processes and ranks, by the file's rank key
            values["runs"] = runs
        return values


def breakdown(
    paths: Sequence[str | Path],
    *,
    exclude_last_profiler_step: bool = False,
    progress: bool | None = None,
    jobs: int | None = 1,
) -> Breakdown:
    """Break down the GPU time of each trace file (one file per rank).

    Args:
        paths: Trace files, one per rank.
        exclude_last_profiler_step: Count only GPU events launched before the last
            ``ProfilerStep#N`` started, as Holistic Trace Analysis does by default (the last
            step is often cut short). Has no effect on traces with fewer than two steps.
        progress: Progress bar on stderr (None: only on a terminal, for large files).
        jobs: Files read at once in worker processes; None for one per core, 1 for one by one
            in this process (one large file is read in that many parts). The result is the
            same either way.

    Returns:
        The breakdown.

    Raises:
        TraceError: A file is missing or corrupt, or two files claim the same rank.
    """
    read = partial(
        _read_rank,
        exclude_last_profiler_step=exclude_last_profiler_step,
        parts=jobs if len(paths) == 1 else 1,
    )
    ranks: list[RankBreakdown] = []
    owners = RankOwners()
    for path, rank in zip(
        paths, map_traces(read, paths, jobs=jobs, progress=progress), strict=True
    ):
        owners.claim(rank.rank, path)
        ranks.append(rank)
    return Breakdown(tuple(ranks))


def _read_rank(
    path: str | Path,
    position: int,
    progress: bool | None,
    *,
    exclude_last_profiler_step: bool,
    parts: int | None = 1,
) -> RankBreakdown:
    """Link one file (in ``parts`` processes) and break it down (runs in a worker process when
    several files are read at once)."""
    trace = read_printable(path, progress=progress, jobs=parts)
    rank = trace.identity.rank_or(position)
    whole = rank_breakdown(trace, rank, exclude_last_profiler_step=exclude_last_profiler_step)
    if not is_run_trace(trace):
        return whole
    return replace(whole, run=run_breakdown(trace, exclude_last_profiler_step))


def run_breakdown(trace: LinkedTrace, exclude_last_profiler_step: bool = False) -> RunBreakdown:
    """Break down a run's merged trace per process and per rank (see
    :mod:`~ncompass.analysis.run_parts`)."""
    processes: list[ProcessBreakdown] = []
    ranks: dict[int, RankBreakdown] = {}
    for part in process_parts(trace):
        own = rank_breakdown(
            part.trace,
            part.under_rank if part.under_rank is not None else 0,
            exclude_last_profiler_step=exclude_last_profiler_step,
        )
        if part.alone_in_rank and part.under_rank is not None:  # its part is its rank's
            ranks[part.under_rank] = own
        processes.append(
            ProcessBreakdown(
                pid=part.process.pid,
                role=part.process.role,
                rank=part.process.rank,
                under_rank=part.under_rank,
                wall_us=wall_us(part.trace),
                marker_cpu_us=marker_cpu_us(part.trace),
                breakdown=own,
            )
        )
    for rank, _, rank_part in rank_parts(trace, skip_alone=True):
        ranks[rank] = rank_breakdown(
            rank_part, rank, exclude_last_profiler_step=exclude_last_profiler_step
        )
    return RunBreakdown(tuple(processes), tuple(ranks[rank] for rank in sorted(ranks)))


def rank_breakdown(
    trace: LinkedTrace, rank: int, *, exclude_last_profiler_step: bool = False
) -> RankBreakdown:
    """Break down one linked trace.

    Per-event work holds compact columns (``array``), not Python lists: a 1 GB trace has half a
    million GPU events, and a list of ints or of ``(start, end)`` tuples costs 36-100 bytes each.

    Args:
        trace: The linked trace of one rank.
        rank: The rank to report it as.
        exclude_last_profiler_step: See :func:`breakdown`.

    Returns:
        The rank's breakdown.
    """
    selected, window = _selected_gpu_events(trace, exclude_last_profiler_step)
    by_start = in_start_order(trace.gpu.start, selected)
    lengths = _union_lengths(trace.gpu, by_start)
    idle = lengths.span - lengths.busy
    return RankBreakdown(
        rank=rank,
        path=str(trace.path),
        kernel_span_us=lengths.span,
        idle_us=idle,
        compute_us=lengths.computation,
        non_compute_us=lengths.span - idle - lengths.computation,
        gpu_events=len(selected),
        computation_us=lengths.computation,
        communication_us=lengths.communication,
        memory_us=lengths.memory,
        communication_overlapped_us=lengths.communication_overlapped,
        launches=launch_statistics(trace, by_start),
        idle_gaps=classify_idle_gaps(trace, by_start),
        window=window,
    )


@dataclass(frozen=True)
class _UnionLengths:
    """Lengths of the unions of a rank's GPU intervals (µs), without the intervals."""

    span: float
    busy: float
    computation: float
    communication: float
    memory: float
    communication_overlapped: float


def _union_lengths(gpu: GpuEvents, by_start: Sequence[int]) -> _UnionLengths:
    """Merge the intervals and measure them, one union at a time; the unions themselves are
    built only to measure the overlap of communication and computation, when there are both."""
    busy_count, busy, first_start, last_end = measured_union(gpu, by_start, ALL_CLASSES)
    span = last_end - first_start if busy_count else 0.0  # IntervalColumns.span
    _, memory, _, _ = measured_union(gpu, by_start, _CLASS_CODE[KernelClass.MEMORY])
    communications, communication, _, _ = measured_union(
        gpu, by_start, _CLASS_CODE[KernelClass.COMMUNICATION]
    )
    computations, computation, _, _ = measured_union(
        gpu, by_start, _CLASS_CODE[KernelClass.COMPUTATION]
    )
    overlapped = 0.0  # overlap_length of an empty union
    if communications and computations:
        overlapped = overlap_length(
            merged_union(gpu, by_start, _CLASS_CODE[KernelClass.COMMUNICATION]),
            merged_union(gpu, by_start, _CLASS_CODE[KernelClass.COMPUTATION]),
        )
    return _UnionLengths(
        span=span,
        busy=busy,
        computation=computation,
        communication=communication,
        memory=memory,
        communication_overlapped=overlapped,
    )


def measured_union(
    gpu: GpuEvents, by_start: Sequence[int], code: int
) -> tuple[int, float, float, float]:
    """How many intervals :func:`merged_union` has, their total length, the first start and the
    last end (0.0 and 0.0 when empty), without keeping them where the C sweep measures as it
    merges."""
    sweep, (usable, column) = _native.sweep, _native.sweep_order(by_start, len(gpu))
    if sweep is not None and usable:
        arguments = (gpu.start, gpu.duration, gpu.kernel_class, column, len(KERNEL_CLASSES), code)
        count, total, first_start, last_end = sweep.merge_union(*arguments, None, None)
        return int(count), float(total), float(first_start), float(last_end)
    merged = merged_union(gpu, by_start, code)
    if not merged:
        return 0, merged.total_length(), 0.0, 0.0
    return len(merged), merged.total_length(), merged.starts[0], merged.ends[-1]


def in_start_order(starts: array[float], selected: Sequence[int]) -> Sequence[int]:
    """``selected`` sorted by start time; ties keep their order (``sorted`` is stable). Every
    event, already in order (as a stream records them), comes back as the ``range`` itself: the
    sweeps then need no index column (8 bytes an event)."""
    sweep = _native.sweep
    if sweep is not None:
        if selected == range(len(starts)) and sweep.in_start_order(starts):
            return selected
        column = array("l", selected)  # sorted in place: 8 bytes an event, no second copy
        if sweep.order_by_start(starts, column) is not None:
            return column  # None: a NaN start, which only Python's sort orders as before
        del column
    return array("l", sorted(selected, key=starts.__getitem__))


ALL_CLASSES = -1
"""The ``code`` of :func:`merged_union` for the union of every GPU event."""
_CLASS_CODE = {kernel_class: code for code, kernel_class in enumerate(KERNEL_CLASSES)}


def merged_union(gpu: GpuEvents, by_start: Sequence[int], code: int) -> IntervalColumns:
    """The union of the GPU intervals of one kernel class (by its code in ``KERNEL_CLASSES``,
    or :data:`ALL_CLASSES`), visited in start order: an interval that starts at or before the
    open one's end extends it. Its columns are allocated at their exact length."""
    sweep, (usable, column) = _native.sweep, _native.sweep_order(by_start, len(gpu))
    if sweep is not None and usable:
        arguments = (gpu.start, gpu.duration, gpu.kernel_class, column, len(KERNEL_CLASSES), code)
        count, _, _, _ = sweep.merge_union(*arguments, None, None)
        merged = IntervalColumns(array("d", [0.0]) * count, array("d", [0.0]) * count)
        sweep.merge_union(*arguments, merged.starts, merged.ends)
        return merged
    merged = IntervalColumns()
    is_open = False
    open_start = open_end = 0.0
    starts, durations, kernel_class = gpu.start, gpu.duration, gpu.kernel_class
    for index in by_start:
        if code != ALL_CLASSES and kernel_class[index] != code:
            continue
        start = starts[index]
        end = start + durations[index]
        if is_open and start <= open_end:
            if end > open_end:
                open_end = end
        else:
            if is_open:
                merged.starts.append(open_start)
                merged.ends.append(open_end)
            is_open, open_start, open_end = True, start, end
    if is_open:
        merged.starts.append(open_start)
        merged.ends.append(open_end)
    return merged


def _selected_gpu_events(
    trace: LinkedTrace, exclude_last_profiler_step: bool
) -> tuple[Sequence[int], str]:
    everything = range(len(trace.gpu))
    if not exclude_last_profiler_step:
        return everything, "all"
    step_starts = [
        marker.start for marker in trace.markers if marker_group(marker.name) == "ProfilerStep#*"
    ]
    if len(step_starts) < 2:
        return everything, "all (fewer than two ProfilerSteps)"
    cutoff = max(step_starts)
    launch_start = trace.launches.start
    selected = array(
        "l",
        (
            index
            for index, launch in enumerate(trace.gpu.launch)
            if launch != NO_LINK and launch_start[launch] < cutoff
        ),
    )
    return selected, "launched before the last ProfilerStep"

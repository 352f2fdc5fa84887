"""The per-call samples one side of a comparison holds: one streaming read per trace file."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncompass.analysis.intervals import total_length, union
from ncompass.analysis.printable_names import read_printable
from ncompass.analysis.timeline import busy_timeline
from ncompass.traces.identity import run_processes
from ncompass.traces.link import NO_LINK, LinkedTrace, Marker, marker_group

STEP_MARKER = "ProfilerStep#*"
_UNSEEN = -2


def _samples() -> dict[str, array[float]]:
    return {}


@dataclass
class SideSamples:
    """Durations (µs) per call, per name, over the trace files of one side, in file order.

    Attributes:
        paths: The trace files read.
        markers: Marker name (``ProfilerStep#*`` for all steps) -> each range's duration.
        cpu_ops: CPU operator name -> each call's duration.
        kernels: GPU event name -> each event's duration.
        spans: Per file, the time from the first to the last event (CPU or GPU).
        gpu_busy: Per file, the union of the GPU events' intervals (0 without GPU events).
        step_gpu_busy: Per profiler step, the union of the intervals of the GPU events
            launched inside it (empty without steps).
        timeline: The first file's busy timeline, for the HTML page (see
            :func:`~ncompass.analysis.timeline.busy_timeline`).
        processes: For runs' merged traces of several processes: per role (``rank 0``,
            ``DataLoader worker 0``, ...), the duration of each of its outermost markers. The
            processes of one file are parts of one run, not runs of their own.
        run_starts: Per column (``markers``, ``cpu_ops``, ``kernels``, ``processes``) and
            name, where the samples of each file holding that name start, so that runs can be
            resampled whole.
    """

    paths: list[Path] = field(default_factory=list)
    markers: dict[str, array[float]] = field(default_factory=_samples)
    cpu_ops: dict[str, array[float]] = field(default_factory=_samples)
    kernels: dict[str, array[float]] = field(default_factory=_samples)
    spans: array[float] = field(default_factory=lambda: array("d"))
    gpu_busy: array[float] = field(default_factory=lambda: array("d"))
    step_gpu_busy: array[float] = field(default_factory=lambda: array("d"))
    timeline: Mapping[str, Any] = field(default_factory=dict)
    processes: dict[str, array[float]] = field(default_factory=_samples)
    run_starts: dict[str, dict[str, list[int]]] = field(
        default_factory=lambda: {"markers": {}, "cpu_ops": {}, "kernels": {}, "processes": {}}
    )

    def starts(self, column: str, name: str) -> list[int]:
        """Where each file's samples of ``name`` start in ``column`` (see ``run_starts``)."""
        return self.run_starts[column].get(name, [])

    @property
    def runs(self) -> int:
        """How many trace files (ranks or runs) this side holds: a run's merged trace is one
        run, whatever its processes."""
        return len(self.paths)

    @property
    def has_gpu(self) -> bool:
        """Whether any file of this side has GPU events."""
        return bool(self.kernels)

    def add(self, trace: LinkedTrace) -> None:
        """Append the samples of one linked trace."""
        if not self.paths:
            self.timeline = busy_timeline(trace)
        self.paths.append(trace.path)
        lengths = {
            column: {name: len(samples) for name, samples in getattr(self, column).items()}
            for column in self.run_starts
        }
        for marker in trace.markers:
            _column(self.markers, marker_group(marker.name)).append(marker.duration)
        for name, totals in trace.cpu_operators.items():
            _column(self.cpu_ops, name).extend(totals.durations)
        gpu = trace.gpu
        names = trace.names
        for index in range(len(gpu)):
            _column(self.kernels, names[gpu.name[index]]).append(gpu.duration[index])
        busy = union(
            (start, start + duration)
            for start, duration in zip(gpu.start, gpu.duration, strict=True)
        )
        self.gpu_busy.append(total_length(busy))
        self.spans.append(_span(trace, busy[-1][1] if busy else None))
        self.step_gpu_busy.extend(_gpu_busy_per_step(trace))
        self._add_processes(trace)
        for column, starts in self.run_starts.items():
            seen = lengths[column]
            for name, samples in getattr(self, column).items():
                start = seen.get(name, 0)
                if len(samples) > start:
                    starts.setdefault(name, []).append(start)

    def _add_processes(self, trace: LinkedTrace) -> None:
        """Each process's outermost markers under its role (for a run's merged trace)."""
        processes = run_processes(trace.metadata)
        if len(processes) < 2:
            return
        role_of = {process.pid: process.role for process in processes}
        thread_role = [
            role_of.get(pid) if isinstance(pid, int) else None for pid, _ in trace.threads
        ]
        for marker in trace.markers:
            role = thread_role[marker.thread]
            if role is not None and marker.parent == NO_LINK:
                _column(self.processes, role).append(marker.duration)


def read_side(paths: Iterable[str | Path], *, progress: bool | None = None) -> SideSamples:
    """Read every trace of one side once and keep its per-call samples.

    Args:
        paths: Trace files (ranks or repeated runs).
        progress: Progress bar on stderr (None: only on a terminal, for large files).

    Returns:
        The side's samples.

    Raises:
        TraceError: A file is missing, truncated or not a trace.
    """
    side = SideSamples()
    for path in paths:
        side.add(read_printable(path, progress=progress))
    return side


def _column(columns: dict[str, array[float]], name: str) -> array[float]:
    column = columns.get(name)
    if column is None:
        column = columns[name] = array("d")
    return column


def _gpu_busy_per_step(trace: LinkedTrace) -> list[float]:
    """GPU busy time of each profiler step: its launches' GPU events, overlaps counted once."""
    markers = trace.markers
    steps = [
        index for index, marker in enumerate(markers) if marker_group(marker.name) == STEP_MARKER
    ]
    if not steps:
        return []
    # marker index -> the step enclosing it (NO_LINK: none), filled as markers are met
    step_of = [_UNSEEN] * len(markers)
    for step in steps:
        step_of[step] = step
    intervals: dict[int, list[tuple[float, float]]] = {step: [] for step in steps}
    gpu = trace.gpu
    for index in range(len(gpu)):
        owner = trace.marker_of_gpu_event(index)
        step = _enclosing_step(markers, step_of, owner)
        if step != NO_LINK:
            start = gpu.start[index]
            intervals[step].append((start, start + gpu.duration[index]))
    return [total_length(union(intervals[step])) for step in steps]


def _enclosing_step(markers: list[Marker], step_of: list[int], index: int) -> int:
    """The profiler step around marker ``index`` (memoised in ``step_of``)."""
    path: list[int] = []
    while index != NO_LINK and step_of[index] == _UNSEEN:
        path.append(index)
        index = markers[index].parent
    step = step_of[index] if index != NO_LINK else NO_LINK
    for visited in path:
        step_of[visited] = step
    return step


def _span(trace: LinkedTrace, gpu_end: float | None) -> float:
    starts = [trace.cpu_start] if trace.cpu_end > trace.cpu_start else []
    ends = [trace.cpu_end] if starts else []
    if gpu_end is not None:
        starts.append(min(trace.gpu.start))
        ends.append(gpu_end)
    return max(ends) - min(starts) if starts else 0.0

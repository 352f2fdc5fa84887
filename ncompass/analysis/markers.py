"""Per-marker statistics: CPU inclusive/exclusive time, calls, and the GPU work each launched.

Markers are grouped by name (every ``ProfilerStep#N`` counts as ``ProfilerStep#*``), so the
session engine can compare a marker across iterations and trace files by its name. Code that
``torch.compile`` compiled runs as Inductor kernels whose events name the markers their source
lines are in (``args.ncompass_markers``): those kernels are listed under each marker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from ncompass.analysis.printable_names import read_printable
from ncompass.analysis.summary_types import MarkerRow
from ncompass.traces.annotate import KERNEL_MARKERS_ARG
from ncompass.traces.events import GPU_CATEGORIES, microseconds
from ncompass.traces.link import NO_LINK, LinkedTrace, marker_group
from ncompass.traces.reader import TraceReader

_SYNCHRONIZE = "synchronize"


def is_synchronization(name: str) -> bool:
    """Whether a CPU runtime call waits for the GPU (``cudaDeviceSynchronize``, ...)."""
    return _SYNCHRONIZE in name.lower()


@dataclass
class CompiledKernelStats:
    """One Inductor kernel generated from a marker's code: its calls and their total time."""

    name: str
    calls: int = 0
    total_us: float = 0.0


@dataclass
class MarkerStats:
    """What the ranges of one marker name cost.

    Attributes:
        name: The marker name (``ProfilerStep#*`` for all profiler steps).
        calls: Number of ranges.
        cpu_total_us: Sum of their durations (inclusive).
        cpu_self_us: Inclusive time minus the time of markers nested directly inside (the part
            no finer marker explains yet).
        cpu_min_us, cpu_max_us: Shortest and longest range.
        gpu_total_us: GPU time of the events launched inside the ranges, nested markers included.
        gpu_self_us: GPU time of the events launched with this marker the innermost one.
        gpu_events: GPU events launched inside the ranges (nested markers included).
        launches: CPU launch calls inside the ranges (nested markers included).
        sync_calls, sync_us: Synchronizing runtime calls inside the ranges and their CPU time.
        threads: Number of distinct threads the ranges ran on.
        compiled_kernels: Inductor kernels generated from the marker's code (its time when
            the code was compiled), the most expensive first.
    """

    name: str
    calls: int = 0
    cpu_total_us: float = 0.0
    cpu_self_us: float = 0.0
    cpu_min_us: float = float("inf")
    cpu_max_us: float = 0.0
    gpu_total_us: float = 0.0
    gpu_self_us: float = 0.0
    gpu_events: int = 0
    launches: int = 0
    sync_calls: int = 0
    sync_us: float = 0.0
    threads: int = 0
    compiled_kernels: list[CompiledKernelStats] = field(default_factory=list)

    @property
    def cpu_mean_us(self) -> float:
        """Mean inclusive duration of one range."""
        return self.cpu_total_us / self.calls if self.calls else 0.0

    def to_dict(self) -> MarkerRow:
        """JSON-ready dict (``cpu_mean_us`` included)."""
        values: dict[str, Any] = asdict(self)
        if self.calls == 0:
            values["cpu_min_us"] = 0.0
        values["cpu_mean_us"] = self.cpu_mean_us
        return cast(MarkerRow, values)


def marker_stats(source: str | Path | LinkedTrace) -> dict[str, MarkerStats]:
    """Statistics of every marker name in a trace, the most expensive (CPU) first.

    Args:
        source: A trace file, or a trace already linked with :func:`link_trace`.

    Returns:
        Marker name -> its statistics.
    """
    trace = source if isinstance(source, LinkedTrace) else read_printable(source)
    markers = trace.markers
    count = len(markers)
    gpu_self = [0.0] * count
    gpu_events_self = [0] * count
    launches_self = [0] * count
    sync_calls_self = [0] * count
    sync_us_self = [0.0] * count
    gpu = trace.gpu
    for index in range(len(gpu)):
        owner = trace.marker_of_gpu_event(index)
        if owner != NO_LINK:
            gpu_self[owner] += gpu.duration[index]
            gpu_events_self[owner] += 1
    launches = trace.launches
    sync_names = {index for index, name in enumerate(trace.names) if is_synchronization(name)}
    for index, owner in enumerate(launches.marker):
        if owner == NO_LINK:
            continue
        launches_self[owner] += 1
        if launches.name[index] in sync_names:
            sync_calls_self[owner] += 1
            sync_us_self[owner] += launches.duration[index]

    # Inclusive totals: every marker adds its own share to each enclosing marker.
    gpu_total = list(gpu_self)
    gpu_events_total = list(gpu_events_self)
    launches_total = list(launches_self)
    sync_calls_total = list(sync_calls_self)
    sync_us_total = list(sync_us_self)
    for index, marker in enumerate(markers):
        parent = marker.parent
        while parent != NO_LINK:
            gpu_total[parent] += gpu_self[index]
            gpu_events_total[parent] += gpu_events_self[index]
            launches_total[parent] += launches_self[index]
            sync_calls_total[parent] += sync_calls_self[index]
            sync_us_total[parent] += sync_us_self[index]
            parent = markers[parent].parent
    _credit_partly_overlapping_markers(
        trace, gpu_total, gpu_events_total, launches_total, sync_calls_total, sync_us_total
    )

    stats: dict[str, MarkerStats] = {}
    threads: dict[str, set[int]] = {}
    for index, marker in enumerate(markers):
        name = marker_group(marker.name)
        entry = stats.get(name)
        if entry is None:
            entry = stats[name] = MarkerStats(name)
            threads[name] = set()
        duration = marker.duration
        entry.calls += 1
        entry.cpu_total_us += duration
        entry.cpu_self_us += max(0.0, duration - marker.nested_us)
        entry.cpu_min_us = min(entry.cpu_min_us, duration)
        entry.cpu_max_us = max(entry.cpu_max_us, duration)
        entry.gpu_total_us += gpu_total[index]
        entry.gpu_self_us += gpu_self[index]
        entry.gpu_events += gpu_events_total[index]
        entry.launches += launches_total[index]
        entry.sync_calls += sync_calls_total[index]
        entry.sync_us += sync_us_total[index]
        threads[name].add(marker.thread)
    for name, entry in stats.items():
        entry.threads = len(threads[name])
    return dict(sorted(stats.items(), key=lambda item: -item[1].cpu_total_us))


def may_hold_compiled_kernels(trace: LinkedTrace) -> bool:
    """Whether the trace ran ``torch.compile``d code (cheap: from what linking kept)."""
    return any(name.startswith(_COMPILED_REGION) for name in trace.cpu_operators) or any(
        name.startswith(_TRITON_KERNEL) for name in trace.names
    )


def compiled_kernel_stats(path: str | Path) -> dict[str, list[CompiledKernelStats]]:
    """Marker name -> the compiled kernels attributed to it, the most expensive first.

    Kernels are the events carrying ``args.ncompass_markers``; a kernel's time is that of its
    GPU events when it has any (GPU kernels), else of its CPU events (C++ kernels).
    """
    kernels: dict[str, tuple[list[str], CompiledKernelStats, CompiledKernelStats]] = {}
    for batch in TraceReader(path, progress=False).batches():
        for event in batch:
            args = event.get("args")
            if not isinstance(args, dict) or event.get("ph") != "X":
                continue
            markers = args.get(KERNEL_MARKERS_ARG)
            if not isinstance(markers, list):
                continue
            name = str(event.get("name"))
            entry = kernels.get(name)
            if entry is None:
                entry = kernels[name] = (
                    [str(marker) for marker in markers],
                    CompiledKernelStats(name),
                    CompiledKernelStats(name),
                )
            category = event.get("cat")
            gpu_side = isinstance(category, str) and category.lower() in GPU_CATEGORIES
            stats = entry[2] if gpu_side else entry[1]
            stats.calls += 1
            stats.total_us += microseconds(event.get("dur") or 0)
    by_marker: dict[str, list[CompiledKernelStats]] = {}
    for markers, on_cpu, on_gpu in kernels.values():
        kernel = on_gpu if on_gpu.calls else on_cpu
        for marker in markers:
            by_marker.setdefault(marker, []).append(kernel)
    for listed in by_marker.values():
        listed.sort(key=lambda stats: -stats.total_us)
    return by_marker


def add_compiled_kernels(
    markers: dict[str, MarkerStats], kernels: dict[str, list[CompiledKernelStats]]
) -> list[MarkerStats]:
    """Fill each marker's ``compiled_kernels``; markers known only from their kernels (their
    ranges inside compiled code never record) get an entry of their own, after the others.

    Returns:
        The markers that have no range in the trace.
    """
    added: list[MarkerStats] = []
    for name, listed in kernels.items():
        entry = markers.get(name)
        if entry is None:
            entry = MarkerStats(name)
            added.append(entry)
        entry.compiled_kernels = listed
    return added


_COMPILED_REGION = "Torch-Compiled Region"  # the range Dynamo records around compiled code
_TRITON_KERNEL = "triton_"


def _credit_partly_overlapping_markers(
    trace: LinkedTrace,
    gpu_total: list[float],
    gpu_events_total: list[int],
    launches_total: list[int],
    sync_calls_total: list[int],
    sync_us_total: list[float],
) -> None:
    """Add each launch to the ranges around it outside its innermost one's parents.

    Start/end ranges (async code, converted Nsight reports) may overlap without nesting; a
    launch inside two of them counts in both, as for nested ranges.
    """
    also_inside = trace.launches.also_inside
    if not also_inside:
        return
    launches = trace.launches
    for launch, owners in also_inside.items():
        synchronizing = is_synchronization(trace.names[launches.name[launch]])
        for owner in owners:
            launches_total[owner] += 1
            if synchronizing:
                sync_calls_total[owner] += 1
                sync_us_total[owner] += launches.duration[launch]
    gpu = trace.gpu
    for index in range(len(gpu)):
        for owner in also_inside.get(gpu.launch[index], ()):
            gpu_total[owner] += gpu.duration[index]
            gpu_events_total[owner] += 1

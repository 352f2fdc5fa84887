"""How much of the time in ``torch.compile``d code the markers' Inductor kernels account for.

Dynamo records a ``Torch-Compiled Region`` range around each call of compiled code (``## Call
CompiledFxGraph ##`` inside it). Inductor's own kernels name the markers their source lines are
in (``args.ncompass_markers``); the rest of the region's time is credited to no marker: the
extern kernels Inductor calls into ATen (``aten::mm``, ``aten::addmm``, ``aten::convolution``,
and the GPU kernels they launch), which provenance does not trace to a source line, and the
compiled wrapper's own time. GPU time is measured where the region launched GPU work, CPU time
otherwise.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from ncompass.analysis.summary_types import CompiledRegionRow, UncreditedRow
from ncompass.traces.annotate import KERNEL_MARKERS_ARG
from ncompass.traces.events import GPU_CATEGORIES, correlation_of, microseconds
from ncompass.traces.reader import TraceReader

COMPILED_REGION = "Torch-Compiled Region"
CALL_COMPILED_GRAPH = "## Call CompiledFxGraph"
_ATEN = "aten::"
_INSIDE_PREFIXES = (COMPILED_REGION, CALL_COMPILED_GRAPH, _ATEN)
_LISTED = 5  # uncredited names listed
_TOUCHING_US = 0.01

_Thread = tuple[object, object]  # (pid, tid)
_Span = tuple[float, float, str, bool]  # start, end, name, credited to markers


def compiled_region_stats(path: str | Path) -> CompiledRegionRow | None:
    """The compiled regions' time, the part the markers' kernels hold, and the rest by name.

    Returns:
        None when the trace has no compiled region.
    """
    regions: dict[_Thread, list[tuple[float, float]]] = defaultdict(list)
    calls: dict[_Thread, list[tuple[float, float]]] = defaultdict(list)
    spans: dict[_Thread, list[_Span]] = defaultdict(list)
    launches: dict[int, tuple[_Thread, float]] = {}
    gpu: list[tuple[int | None, str, float, bool]] = []
    for batch in TraceReader(path, progress=False).batches():
        for event in batch:
            if event.get("ph") != "X":
                continue
            name = event.get("name")
            args = event.get("args")
            marked = isinstance(args, dict) and KERNEL_MARKERS_ARG in args
            category = event.get("cat")
            if isinstance(category, str) and category.lower() in GPU_CATEGORIES:
                duration = microseconds(event.get("dur"))
                gpu.append((correlation_of(event), str(name), duration, marked))
                continue
            if not isinstance(name, str):
                continue
            thread = (event.get("pid"), event.get("tid"))
            if marked or name.startswith(_INSIDE_PREFIXES):
                start = microseconds(event.get("ts"))
                end = start + microseconds(event.get("dur"))
                if name.startswith(COMPILED_REGION):
                    regions[thread].append((start, end))
                elif name.startswith(CALL_COMPILED_GRAPH):
                    calls[thread].append((start, end))
                else:
                    spans[thread].append((start, end, name, marked))
            elif isinstance(args, dict) and "correlation" in args:
                correlation = correlation_of(event)
                if correlation is not None:
                    launches[correlation] = (thread, microseconds(event.get("ts")))
    outer = {thread: _union(found) for thread, found in (regions or calls).items()}
    if not outer:
        return None
    inside = [
        (name, duration, marked)
        for correlation, name, duration, marked in gpu
        if correlation in launches and _within(outer, *launches[correlation])
    ]
    if inside:
        total = sum(duration for _, duration, _ in inside)
        credited = sum(duration for _, duration, marked in inside if marked)
        uncredited: dict[str, list[float]] = defaultdict(list)
        for name, duration, marked in inside:
            if not marked:
                uncredited[name].append(duration)
        return _row("gpu", outer, total, credited, uncredited)
    total = sum(end - start for found in outer.values() for start, end in found)
    credited = 0.0
    by_name: dict[str, list[float]] = defaultdict(list)
    for thread, found in spans.items():
        for start, end, name, marked in _outermost(
            s for s in found if _within(outer, thread, s[0])
        ):
            if marked:
                credited += end - start
            else:
                by_name[name].append(end - start)
    return _row("cpu", outer, total, credited, by_name)


def _row(
    source: Literal["gpu", "cpu"],
    outer: dict[_Thread, list[tuple[float, float]]],
    total: float,
    credited: float,
    uncredited: dict[str, list[float]],
) -> CompiledRegionRow:
    named: list[UncreditedRow] = [
        {"name": name, "calls": len(durations), "total_us": sum(durations)}
        for name, durations in uncredited.items()
    ]
    named.sort(key=lambda row: -row["total_us"])
    return {
        "source": source,
        "regions": sum(len(found) for found in outer.values()),
        "total_us": total,
        "credited_us": credited,
        "uncredited_us": max(total - credited, 0.0),
        "uncredited": named[:_LISTED],
    }


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _within(outer: dict[_Thread, list[tuple[float, float]]], thread: _Thread, ts: float) -> bool:
    """Whether ``ts`` falls in one of the thread's regions (sorted, disjoint: a binary search)."""
    found = outer.get(thread, ())
    index = bisect_right(found, (ts, float("inf"))) - 1
    return index >= 0 and found[index][0] <= ts <= found[index][1]


def _outermost(spans: Iterable[_Span]) -> list[_Span]:
    """The spans not inside another one (a kernel's or an ATen op's children are its own)."""
    kept: list[_Span] = []
    for span in sorted(spans, key=lambda s: (s[0], -s[1])):
        # inside the last one kept; a span that merely touches it (timestamps rounded to the
        # nanosecond can overlap by a hair) is a sibling
        if kept and span[1] <= kept[-1][1] + _TOUCHING_US and span[0] < kept[-1][1] - _TOUCHING_US:
            continue
        kept.append(span)
    return kept


__all__ = ["CALL_COMPILED_GRAPH", "COMPILED_REGION", "compiled_region_stats"]

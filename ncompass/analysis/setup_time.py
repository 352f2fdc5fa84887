"""Time spent once, apart from the steady state: the program's imports and model construction
(the sidecar's setup spans, see :mod:`.setup_spans`), torch.compile's compilation, and the share
of the run that no marker covers.

``torch.compile`` records its own phases as CPU operators: ``dynamo`` and
``entire_frame_compile`` around a whole compilation, and every phase inside (``backend_compile``,
``inductor_compile``, ``code_gen``, ...) twice, as ``NAME`` and ``NAME (dynamo_timed)``. They are
setup, not the program's work: they stay out of the operator table and the bottleneck rules, and
the summary reports their time apart. The outermost phase wraps the others, so the compile time
is the largest phase total. Where a marker holds a compilation (the first call of a compiled
model), a second pass over the trace, made only when it compiled, finds the outermost phases'
ranges, so that the marker's steady-state time is its time outside them. The operators that ran
wholly inside a setup span of their own thread, or inside a compilation, are found in the same
pass (made also when only setup spans exist) and leave the operator table too.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ncompass.analysis.setup_spans import (
    CONSTRUCTION,
    IMPORT,
    SetupSpan,
    SpansByThread,
    kind_total,
    length,
    outside,
    outside_compilation,
    read_setup_spans,
    top_labels,
    union,
)
from ncompass.analysis.summary_types import SetupRow
from ncompass.traces._decode import decode_link_structs
from ncompass.traces.events import microseconds
from ncompass.traces.link import LinkedTrace
from ncompass.traces.reader import TraceReader

_TIMED_SUFFIX = " (dynamo_timed)"
_COMPILE_ROOTS = frozenset({"dynamo", "entire_frame_compile"})
# the whole-run range of `--full-trace` and of sessions: the run itself, never a finding
WHOLE_RUN_MARKERS = frozenset({"ncompass.full_trace", "ProfilerStep#*"})


def compile_operator_names(names: Iterable[str]) -> frozenset[str]:
    """The CPU operator names among ``names`` that are torch.compile's own phases."""
    present = set(names)
    return frozenset(
        name
        for name in present
        if name.endswith(_TIMED_SUFFIX) or name in _COMPILE_ROOTS or name + _TIMED_SUFFIX in present
    )


@dataclass(frozen=True)
class SetupTime:
    """What a trace spent once, and how much of it markers cover.

    Attributes:
        compile_us: torch.compile's compilation (the largest phase total; 0 without one).
        compilations: How many times torch.compile compiled (calls of its outermost phase).
        in_markers_us: CPU wall time inside at least one marker (the whole-run ranges aside).
        wall_us: The trace's CPU wall time.
        compile_in_marker_us: Per marker name, the compile time inside its ranges.
        compile_operator_us: Per CPU operator name, its time inside the compilation (the
            phases themselves, and the operators compilation ran: fake-tensor tracing, ...).
        compile_operator_calls: Per CPU operator name, its calls inside the compilation.
        spans: The program's imports and model constructions (None: the trace records none,
            it has no sidecar or an older one).
        setup_us: The time of the spans and the compilation together (their union).
        setup_outside_markers_us: The part of ``setup_us`` outside every marker.
        setup_in_marker_us: Per marker name, the import and construction time inside its ranges.
        setup_operator_us: Per CPU operator name, its time inside a setup span of its thread
            (outside the compilation).
        setup_operator_calls: Per CPU operator name, its calls inside one.
    """

    compile_us: float
    compilations: int
    in_markers_us: float
    wall_us: float
    compile_in_marker_us: dict[str, float] = field(default_factory=dict)
    compile_operator_us: dict[str, float] = field(default_factory=dict)
    compile_operator_calls: dict[str, int] = field(default_factory=dict)
    spans: list[SetupSpan] | None = None
    setup_us: float = 0.0
    setup_outside_markers_us: float = 0.0
    setup_in_marker_us: dict[str, float] = field(default_factory=dict)
    setup_operator_us: dict[str, float] = field(default_factory=dict)
    setup_operator_calls: dict[str, int] = field(default_factory=dict)

    def operator_steady(self, name: str, total_us: float, calls: int) -> tuple[float, int]:
        """A CPU operator's time and calls outside the compilation and the setup spans."""
        inside = self.compile_operator_us.get(name, 0.0) + self.setup_operator_us.get(name, 0.0)
        inside_calls = self.compile_operator_calls.get(name, 0) + self.setup_operator_calls.get(
            name, 0
        )
        return max(total_us - inside, 0.0), calls - inside_calls

    def steady_us(self, marker: str, cpu_total_us: float) -> float:
        """A marker's CPU time outside torch.compile's compilation, imports and construction."""
        inside = self.compile_in_marker_us.get(marker, 0.0)
        return max(cpu_total_us - inside - self.setup_in_marker_us.get(marker, 0.0), 0.0)

    @property
    def steady_state_us(self) -> float:
        """The CPU wall time outside imports, model construction and compilation."""
        return max(self.wall_us - max(self.setup_us, self.compile_us), 0.0)

    @property
    def outside_markers_us(self) -> float:
        """CPU wall time outside every marker."""
        return max(self.wall_us - self.in_markers_us, 0.0)

    def to_dict(self) -> SetupRow:
        """JSON-ready dict (the summary's ``trace.setup``)."""
        return {
            "compile_us": self.compile_us,
            "compilations": self.compilations,
            "in_markers_us": self.in_markers_us,
            "outside_markers_us": self.outside_markers_us,
            "compile_in_marker_us": dict(self.compile_in_marker_us),
            "setup_spans_recorded": self.spans is not None,
            "imports_us": kind_total(self.spans or [], IMPORT),
            "construction_us": kind_total(self.spans or [], CONSTRUCTION),
            "imports_top": top_labels(self.spans or [], IMPORT),
            "construction_top": top_labels(self.spans or [], CONSTRUCTION),
            "setup_us": max(self.setup_us, self.compile_us),
            "steady_us": self.steady_state_us,
            "setup_outside_markers_us": self.setup_outside_markers_us,
            "other_outside_markers_us": max(
                self.outside_markers_us - self.setup_outside_markers_us, 0.0
            ),
        }


def setup_time(trace: LinkedTrace) -> SetupTime:
    """The setup time (imports, construction, compilation) and the marker coverage of ``trace``."""
    phases = compile_operator_names(trace.cpu_operators)
    compile_us = max((trace.cpu_operators[name].total_us for name in phases), default=0.0)
    roots = [trace.cpu_operators[name].calls for name in phases & _COMPILE_ROOTS]
    compilations = max(roots, default=1 if compile_us else 0)
    wall = trace.cpu_end - trace.cpu_start if trace.cpu_end > trace.cpu_start else 0.0
    setup_spans = read_setup_spans(trace)
    spans: list[tuple[float, float]] = []
    if compile_us > 0:  # one more pass over the file, only for a trace that compiled
        spans = _compile_spans(trace, phases)
    inside = _inside_markers(trace, spans)
    if setup_spans:  # imports made while compiling are compilation: each moment counts once
        setup_spans = outside_compilation(setup_spans, spans)
    by_thread = SpansByThread(setup_spans or [])
    operators: dict[str, float] = {}
    calls: dict[str, int] = {}
    setup_operators: dict[str, float] = {}
    setup_calls: dict[str, int] = {}
    if spans or by_thread:  # one pass for both: operators inside compilation or setup spans
        operators, calls, setup_operators, setup_calls = _operators_inside(trace, spans, by_thread)
    covered = _marker_ranges(trace)
    span_ranges = union((span.start, span.end) for span in setup_spans or [])
    every_setup = union([*spans, *span_ranges])
    return SetupTime(
        compile_us,
        compilations,
        length(covered),
        wall,
        inside,
        operators,
        calls,
        spans=setup_spans,
        setup_us=length(every_setup),
        setup_outside_markers_us=outside(every_setup, covered),
        setup_in_marker_us=_inside_markers(trace, span_ranges),
        setup_operator_us=setup_operators,
        setup_operator_calls=setup_calls,
    )


def _inside_markers(trace: LinkedTrace, spans: list[tuple[float, float]]) -> dict[str, float]:
    """Per marker name, the time of disjoint ``spans`` inside its ranges."""
    inside: dict[str, float] = {}
    if not spans:
        return inside
    for marker in trace.markers:
        overlap = _overlap(spans, marker.start, marker.start + marker.duration)
        if overlap > 0:
            inside[marker.name] = inside.get(marker.name, 0.0) + overlap
    return inside


def _cpu_ops(
    trace: LinkedTrace, starting: tuple[float, float] = (-math.inf, math.inf)
) -> Iterator[tuple[str, float, float, Any, Any]]:
    """Every complete CPU operator event starting within ``starting`` (relative): name, start
    (relative), duration, pid, tid.

    Events are decoded into compact structs holding only the keys read here (in C, by
    msgspec; dicts where it cannot read a batch), about a quarter less work than dicts."""
    origin = trace.origin_us
    low, high = starting
    reader = TraceReader(trace.path, progress=False)
    batches: Iterator[list[Any]] = (
        reader.batches() if decode_link_structs is None else reader.struct_batches()
    )
    for batch in batches:
        for event in batch:
            if type(event) is dict:
                if event.get("cat") == "cpu_op" and event.get("ph") == "X":
                    start = microseconds(event.get("ts")) - origin
                    if low <= start <= high:
                        duration = microseconds(event.get("dur"))
                        pid, tid = event.get("pid"), event.get("tid")
                        yield str(event.get("name")), start, duration, pid, tid
            elif event.cat == "cpu_op" and event.ph == "X":
                ts = event.ts
                start = (ts if type(ts) is float else microseconds(ts)) - origin
                if low <= start <= high:
                    dur = event.dur
                    duration = dur if type(dur) is float else microseconds(dur)
                    yield str(event.name), start, duration, event.pid, event.tid


def _compile_spans(trace: LinkedTrace, phases: frozenset[str]) -> list[tuple[float, float]]:
    """The compile phases' ranges, merged, in the trace's relative time."""
    spans = sorted(
        (start, start + length) for name, start, length, _, _ in _cpu_ops(trace) if name in phases
    )
    return union(spans)


def _operators_inside(
    trace: LinkedTrace, spans: list[tuple[float, float]], setup: SpansByThread
) -> tuple[dict[str, float], dict[str, int], dict[str, float], dict[str, int]]:
    """Per CPU operator name, the time and calls of its events wholly inside a compile span,
    then of the others wholly inside a setup span of their thread."""
    starts = [begin for begin, _ in spans]
    inside: dict[str, float] = {}
    calls: dict[str, int] = {}
    in_setup: dict[str, float] = {}
    setup_calls: dict[str, int] = {}
    first, last = setup.first, setup.last  # most operators run after setup: rejected here
    # without compilation, only the operators that start within the setup spans matter
    starting = (-math.inf, math.inf) if spans else (first, last)
    for name, start, duration, pid, tid in _cpu_ops(trace, starting):
        index = bisect_right(starts, start) - 1 if starts else -1
        if index >= 0 and start + duration <= spans[index][1]:
            inside[name] = inside.get(name, 0.0) + duration
            calls[name] = calls.get(name, 0) + 1
        elif first <= start <= last and setup.holds(pid, tid, start, start + duration):
            in_setup[name] = in_setup.get(name, 0.0) + duration
            setup_calls[name] = setup_calls.get(name, 0) + 1
    return inside, calls, in_setup, setup_calls


def _overlap(spans: list[tuple[float, float]], start: float, end: float) -> float:
    return sum(max(0.0, min(end, stop) - max(start, begin)) for begin, stop in spans)


def _marker_ranges(trace: LinkedTrace) -> list[tuple[float, float]]:
    """The union, over all threads, of the marker ranges (whole-run ranges aside)."""
    return union(
        (marker.start, marker.start + marker.duration)
        for marker in trace.markers
        if marker.name not in WHOLE_RUN_MARKERS
    )


__all__ = ["WHOLE_RUN_MARKERS", "SetupTime", "compile_operator_names", "setup_time"]

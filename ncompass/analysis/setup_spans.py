"""The program's imports and model construction, from the setup spans ``ncompass run`` records
in the trace's sidecar (``setup_spans``, see ``capture/setup_spans.py``).

Each span is an outermost import or ``torch.nn.Module`` construction of one thread, in Unix
microseconds; here it is moved into the trace's relative time (Unix time less
``baseTimeNanoseconds`` and the trace's origin) and clipped to the trace's CPU range. A trace
without a sidecar, or whose sidecar predates setup spans, has none: :func:`read_setup_spans`
returns None and the summary says once that imports and construction are not told apart.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ncompass.analysis.summary_types import SetupLabelRow
from ncompass.run_files import read_sidecar_document
from ncompass.traces.link import LinkedTrace

IMPORT = "import"
CONSTRUCTION = "construction"
_TOP_LABELS = 5


@dataclass(frozen=True)
class SetupSpan:
    """One outermost import or model construction, in the trace's relative time (µs).

    Attributes:
        kind: ``"import"`` or ``"construction"``.
        label: The module imported, or the class constructed.
        start: Start, relative to the trace's origin, clipped to its CPU range.
        end: End, likewise.
        thread: ``(pid, tid)`` of the thread it ran on, as the trace's CPU events name it.
        compiling_us: The part of it torch.compile was compiling (Dynamo and Inductor import
            modules as they compile): counted as compilation, not here.
    """

    kind: str
    label: str
    start: float
    end: float
    thread: tuple[int, int]
    compiling_us: float = 0.0

    @property
    def duration(self) -> float:
        """Its time outside compilation."""
        return max(self.end - self.start - self.compiling_us, 0.0)

    @property
    def group(self) -> str:
        """What the summary totals it under: an import's top-level package, a class's name."""
        return self.label.split(".", 1)[0] if self.kind == IMPORT else self.label


def read_setup_spans(trace: LinkedTrace) -> list[SetupSpan] | None:
    """The setup spans of the run that wrote ``trace``, inside its CPU range, by start; None
    when the trace has no sidecar or its sidecar has no ``setup_spans`` (an older run)."""
    records = _sidecar_records(Path(trace.path))
    if records is None:
        return None
    if trace.cpu_end <= trace.cpu_start:
        return []
    shift = float(trace.metadata.get("baseTimeNanoseconds") or 0) / 1000 + trace.origin_us
    spans = []
    for record in records:
        try:
            start = float(record["start_unix_us"]) - shift
            end = float(record["end_unix_us"]) - shift
            thread = (int(record["pid"]), int(record["tid"]))
            kind, label = str(record["kind"]), str(record["label"])
        except (KeyError, TypeError, ValueError):
            continue  # a hand-edited sidecar: what can be read still counts
        start, end = max(start, trace.cpu_start), min(end, trace.cpu_end)
        if end > start:
            spans.append(SetupSpan(kind, label, start, end, thread))
    return sorted(spans, key=lambda span: span.start)


def _sidecar_records(trace_path: Path) -> list[dict[str, Any]] | None:
    sidecar = read_sidecar_document(trace_path)
    records = sidecar.get("setup_spans") if sidecar is not None else None
    if not isinstance(records, list):
        return None
    return [record for record in records if isinstance(record, dict)]


def outside_compilation(
    spans: list[SetupSpan], compiling: Sequence[tuple[float, float]]
) -> list[SetupSpan]:
    """``spans``, each with the part of it inside the disjoint ``compiling`` ranges set apart."""
    if not compiling:
        return spans
    return [
        replace(
            span, compiling_us=span.end - span.start - outside([(span.start, span.end)], compiling)
        )
        for span in spans
    ]


def kind_total(spans: Iterable[SetupSpan], kind: str) -> float:
    """The time of ``kind``'s spans (outermost spans of one thread never overlap)."""
    return sum(span.duration for span in spans if span.kind == kind)


def top_labels(spans: Iterable[SetupSpan], kind: str) -> list[SetupLabelRow]:
    """Per package imported (or class constructed), its time and spans, largest first."""
    totals: dict[str, tuple[float, int]] = {}
    for span in spans:
        if span.kind == kind and span.duration > 0:
            us, count = totals.get(span.group, (0.0, 0))
            totals[span.group] = (us + span.duration, count + 1)
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:_TOP_LABELS]
    return [{"label": label, "us": us, "count": count} for label, (us, count) in ranked]


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """``intervals`` merged into disjoint ranges, by start."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def length(ranges: Sequence[tuple[float, float]]) -> float:
    """The time disjoint ``ranges`` cover."""
    return sum(end - start for start, end in ranges)


def outside(ranges: Sequence[tuple[float, float]], cover: Sequence[tuple[float, float]]) -> float:
    """The time of disjoint ``ranges`` that disjoint ``cover`` does not cover."""
    total, index = 0.0, 0
    for start, end in ranges:
        covered = 0.0
        while index < len(cover) and cover[index][1] <= start:
            index += 1
        probe = index
        while probe < len(cover) and cover[probe][0] < end:
            covered += min(end, cover[probe][1]) - max(start, cover[probe][0])
            probe += 1
        total += (end - start) - covered
    return total


class SpansByThread:
    """Setup spans per ``(pid, tid)``: is a CPU event of a thread wholly inside one of them?"""

    def __init__(self, spans: Iterable[SetupSpan]) -> None:
        self._spans: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for span in spans:
            self._spans.setdefault(span.thread, []).append((span.start, span.end))
        for ranges in self._spans.values():
            ranges.sort()
        self._starts = {thread: [start for start, _ in r] for thread, r in self._spans.items()}
        every = [edge for ranges in self._spans.values() for edge in ranges]
        self.first = min((start for start, _ in every), default=float("inf"))
        self.last = max((end for _, end in every), default=float("-inf"))

    def __bool__(self) -> bool:
        return bool(self._spans)

    def holds(self, pid: Any, tid: Any, start: float, end: float) -> bool:
        """Whether a setup span of thread ``(pid, tid)`` holds ``[start, end]``."""
        try:
            thread = (int(pid), int(tid))
        except (TypeError, ValueError):
            return False
        starts = self._starts.get(thread)
        if not starts:
            return False
        index = bisect_right(starts, start) - 1
        return index >= 0 and end <= self._spans[thread][index][1]


__all__ = [
    "CONSTRUCTION",
    "IMPORT",
    "SetupSpan",
    "SpansByThread",
    "kind_total",
    "length",
    "outside",
    "outside_compilation",
    "read_setup_spans",
    "top_labels",
    "union",
]

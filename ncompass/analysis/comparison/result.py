"""What a comparison found: typed changes per entry, and the whole result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ncompass.analysis.comparison.html_page import render_comparison_html
from ncompass.analysis.comparison.interval import CONFIDENCE, RatioInterval
from ncompass.analysis.comparison.markdown import render_comparison_markdown

SLOWER = "slower"
FASTER = "faster"
SAME = "same"
UNKNOWN = "unknown"
NEW = "new"
VANISHED = "vanished"


@dataclass(frozen=True)
class SideTimes:
    """One entry on one side, per run (the mean over the side's trace files).

    Attributes:
        calls: Calls per run.
        total_us: Time per run.
        mean_us: Mean time of one call (or step, or run).
        samples: How many samples the side holds (calls over all its files).
    """

    calls: float
    total_us: float
    mean_us: float
    samples: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "calls": self.calls,
            "total_us": self.total_us,
            "mean_us": self.mean_us,
            "samples": self.samples,
        }


@dataclass(frozen=True)
class Change:
    """One entry (a marker, CPU operator, kernel, or a whole-run measure) before and after.

    Attributes:
        kind: ``step``, ``run``, ``gpu_busy``, ``marker``, ``cpu_op`` or ``kernel``.
        name: The entry's name (the normalised name when matched by it).
        before, after: Its times on each side; None where it does not occur.
        ratio: ``after.mean_us / before.mean_us`` (None when a side is missing or 0).
        interval: The bootstrap interval of the ratio (None with fewer than two samples a side).
        matched_by: ``name``, ``normalized name`` (kernels), or empty for new/vanished entries.
        names_before, names_after: The exact names pooled under a normalised name.
    """

    kind: str
    name: str
    before: SideTimes | None
    after: SideTimes | None
    ratio: float | None
    interval: RatioInterval | None
    matched_by: str = "name"
    names_before: tuple[str, ...] = ()
    names_after: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """``slower``/``faster`` when the interval excludes 1, ``same`` when it holds 1,
        ``unknown`` without an interval, ``new``/``vanished`` when one side lacks the entry."""
        if self.before is None:
            return NEW
        if self.after is None:
            return VANISHED
        if self.interval is None:
            return UNKNOWN
        if self.interval.low > 1.0:
            return SLOWER
        if self.interval.high < 1.0:
            return FASTER
        return SAME

    @property
    def is_real(self) -> bool:
        """Whether the interval excludes 1."""
        return self.verdict in (SLOWER, FASTER)

    @property
    def delta_us(self) -> float:
        """Change of the time per run (after minus before)."""
        before = self.before.total_us if self.before else 0.0
        after = self.after.total_us if self.after else 0.0
        return after - before

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        values: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "verdict": self.verdict,
            "before": self.before.to_dict() if self.before else None,
            "after": self.after.to_dict() if self.after else None,
            "delta_us": self.delta_us,
            "ratio": self.ratio,
            "interval": [self.interval.low, self.interval.high] if self.interval else None,
            "matched_by": self.matched_by,
        }
        if self.names_before or self.names_after:
            values["names_before"] = list(self.names_before)
            values["names_after"] = list(self.names_after)
        return values


@dataclass(frozen=True)
class Comparison:
    """Two sides of traces compared: the whole run first, then every marker, operator, kernel.

    Attributes:
        before_paths, after_paths: The trace files of each side.
        overall: Whole-run measures: the step time (``ProfilerStep`` ranges, else the run's
            span), and the GPU busy time when there is GPU work.
        markers, cpu_ops, kernels: One change per name, the largest change of time first.
        timelines: The busy timelines of each side's first trace, for the HTML page (not in
            :meth:`to_dict`).
    """

    before_paths: tuple[str, ...]
    after_paths: tuple[str, ...]
    overall: tuple[Change, ...]
    markers: tuple[Change, ...] = field(default_factory=tuple)
    cpu_ops: tuple[Change, ...] = field(default_factory=tuple)
    kernels: tuple[Change, ...] = field(default_factory=tuple)
    timelines: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {})

    @property
    def run_time(self) -> Change:
        """The whole-run time: per step when both sides have profiler steps, else per run."""
        return self.overall[0]

    def changes(self) -> list[Change]:
        """Every marker, CPU operator and kernel change."""
        return [*self.markers, *self.cpu_ops, *self.kernels]

    def biggest_changes(self, count: int = 3) -> list[Change]:
        """The real changes moving the most time per run (profiler steps aside)."""
        real = [
            change
            for change in self.changes()
            if change.is_real and not (change.kind == "marker" and change.name == _STEPS)
        ]
        return sorted(real, key=lambda change: -abs(change.delta_us))[:count]

    def marker(self, name: str) -> Change | None:
        """The change of one marker, by name."""
        return next((change for change in self.markers if change.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``ncompass compare --json`` shape)."""
        return {
            "before": list(self.before_paths),
            "after": list(self.after_paths),
            "confidence": CONFIDENCE,
            "overall": [change.to_dict() for change in self.overall],
            "biggest_changes": [change.to_dict() for change in self.biggest_changes()],
            "markers": [change.to_dict() for change in self.markers],
            "cpu_ops": [change.to_dict() for change in self.cpu_ops],
            "kernels": [change.to_dict() for change in self.kernels],
        }

    def to_markdown(self, *, top: int = 20) -> str:
        """The report ``ncompass compare`` prints."""
        return render_comparison_markdown(self.to_dict(), top=top)

    def to_html(self, *, top: int = 50) -> str:
        """One self-contained HTML page (sortable tables, no network at view time)."""
        return render_comparison_html(self.to_dict(), top=top, timelines=self.timelines)

    def _repr_html_(self) -> str:
        return self.to_html()


_STEPS = "ProfilerStep#*"

"""What a comparison found: typed changes per entry, and the whole result."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ncompass.analysis.comparison.html_page import render_comparison_html
from ncompass.analysis.comparison.interval import CONFIDENCE, MIN_BLOCKS, RatioInterval
from ncompass.analysis.comparison.markdown import render_comparison_markdown

SLOWER = "slower"
FASTER = "faster"
SAME = "same"
UNKNOWN = "unknown"
NEW = "new"
VANISHED = "vanished"

# The practical-equivalence band: a change is only slower or faster when the ratio of the means
# also leaves 1 by more than this, as asv's default factor (the calls of one run do not see
# run-to-run variation; docs/compare.md, "Is it real?", has the measurements).
NOISE = 0.10
# A mean call moving less than this (µs) is profiler jitter: sub-µs operators of an unchanged
# program move 10-20 % between runs.
NEGLIGIBLE_US = 0.05
# An entry with fewer calls than this on a side (the whole-run measures excepted) has no typical
# call to check (its lower quartile is its fastest call): its span must clear FEW_CALLS_EDGE.
# In three interleaved runs a side of an unchanged program, operators called once a run (setup:
# aten::div, aten::to, ...) came out 1.2-2x apart 4 times in 10; real changes of such entries,
# as the embedding kernels of two ranks (2 calls, 2.4-3.1x), stand well beyond a doubling.
FEWEST_CALLS = 5
FEW_CALLS_EDGE = 2.0


@dataclass(frozen=True)
class SideTimes:
    """One entry on one side, per run (the mean over the side's trace files).

    Attributes:
        calls: Calls per run.
        total_us: Time per run.
        mean_us: Mean time of one call (or step, or run).
        samples: How many samples the side holds (calls over all its files).
        lower_quartile_us: The lower quartile of one call's time: the calls least disturbed by
            other processes (preemption and contention only add time), which a change to the
            code moves as it moves the others.
    """

    calls: float
    total_us: float
    mean_us: float
    samples: int
    lower_quartile_us: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "calls": self.calls,
            "total_us": self.total_us,
            "mean_us": self.mean_us,
            "samples": self.samples,
            "lower_quartile_us": self.lower_quartile_us,
        }


@dataclass(frozen=True)
class Change:
    """One entry (a marker, CPU operator, kernel, or a whole-run measure) before and after.

    Attributes:
        kind: ``step``, ``run``, ``gpu_busy``, ``marker``, ``cpu_op``, ``kernel`` or
            ``process`` (a role of a run's processes: the time of its outermost markers).
        name: The entry's name (the normalised name when matched by it).
        before, after: Its times on each side; None where it does not occur.
        ratio: ``after.mean_us / before.mean_us`` (None when a side is missing or 0).
        interval: The bootstrap interval of the ratio (None with fewer than two samples a side).
        matched_by: ``name``, ``normalized name`` (kernels), or empty for new/vanished entries.
        names_before, names_after: The exact names pooled under a normalised name.
        noise: The practical-equivalence band: a real change leaves ``1 ± noise`` (as a
            fraction; faster means below ``1 / (1 + noise)``, so swapping the sides mirrors
            the verdict).
        negligible_us: A change of the mean call smaller than this is ``same`` (0 for the
            whole-run measures).
        fewest_calls: With fewer samples than this on a side the interval must clear
            ``FEW_CALLS_EDGE`` (0 for the whole-run measures, one sample a run by nature).
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
    noise: float = NOISE
    negligible_us: float = 0.0
    fewest_calls: int = 0

    @property
    def verdict(self) -> str:
        """``slower``/``faster`` when the change is real (see :meth:`_moved`), else ``same``;
        ``unknown`` without an interval; ``new``/``vanished`` when one side lacks the entry."""
        if self.before is None:
            return NEW
        if self.after is None:
            return VANISHED
        if self.interval is None or self.ratio is None:
            return UNKNOWN
        if self._moved(slower=True):
            return SLOWER
        if self._moved(slower=False):
            return FASTER
        return SAME

    def _moved(self, *, slower: bool) -> bool:
        """Whether the time paid and the typical call both moved that way beyond the noise:
        the interval of the ratio of the means excludes 1 on that side (clears the noise band
        when it is the span of a few runs, see :attr:`_interval_edge`), that ratio and the
        ratio of the lower quartiles pass ``1 + noise`` (slower) or ``1 / (1 + noise)``
        (faster), and the mean and the lower quartile each moved by at least
        ``negligible_us``."""
        assert self.before is not None and self.after is not None and self.interval is not None
        before, after = self.before, self.after
        if (
            abs(after.mean_us - before.mean_us) < self.negligible_us
            or abs(after.lower_quartile_us - before.lower_quartile_us) < self.negligible_us
            or before.lower_quartile_us <= 0
        ):
            return False
        ratios = (self.ratio or 1.0, after.lower_quartile_us / before.lower_quartile_us)
        edge = self._interval_edge
        if slower:
            return self.interval.low > edge and min(ratios) > 1.0 + self.noise
        return self.interval.high < 1.0 / edge and max(ratios) < 1.0 / (1.0 + self.noise)

    @property
    def _interval_edge(self) -> float:
        """What the interval must clear: 1, or ``1 + noise`` when it is the span of a few
        runs (an unchanged program puts every run of one side above every run of the other
        1 time in 20 each way with 3 runs a side; the margin asks the runs to be apart), or
        ``FEW_CALLS_EDGE`` with fewer than ``fewest_calls`` samples on a side; for a span,
        never less than how far one side's own runs are apart (``interval.within``)."""
        before, after = self.before, self.after
        edge = 1.0
        if before and after and min(before.samples, after.samples) < self.fewest_calls:
            edge = FEW_CALLS_EDGE
        if self.interval is not None and self.interval.span:
            # The sides must be further apart than the runs of either side are from each
            # other: what a side's own runs spread over is not a change between sides.
            edge = max(edge, 1.0 + self.noise, self.interval.within)
        return edge

    @property
    def lower_quartile_ratio(self) -> float | None:
        """The typical call's ratio: after's lower quartile over before's."""
        if self.before is None or self.after is None or self.before.lower_quartile_us <= 0:
            return None
        return self.after.lower_quartile_us / self.before.lower_quartile_us

    @property
    def reason(self) -> str:
        """Why the verdict is what it is: the condition that decided it (see :meth:`_moved`)."""
        verdict = self.verdict
        if verdict in (NEW, VANISHED):
            return f"on the {'after' if verdict == NEW else 'before'} side only"
        if verdict == UNKNOWN or self.interval is None or self.ratio is None:
            return "one sample a side: no interval"
        typical = self.lower_quartile_ratio
        typical_text = f"typical call x{typical:.3f}" if typical is not None else "no typical call"
        band = f"±{self.noise:.0%}"
        if verdict in (SLOWER, FASTER):
            return f"interval excludes 1; mean x{self.ratio:.3f} and {typical_text} beyond {band}"
        if self.interval.low <= 1.0 <= self.interval.high:
            return "interval holds 1"
        assert self.before is not None and self.after is not None
        calls = min(self.before.samples, self.after.samples)
        if calls < self.fewest_calls:
            low, high = self.interval.low, self.interval.high
            return (
                f"{calls} calls on a side: under {self.fewest_calls} the span must clear "
                f"x{FEW_CALLS_EDGE:g} (it is x{low:.3f}-x{high:.3f})"
            )
        moved = abs(self.after.mean_us - self.before.mean_us)
        if moved < self.negligible_us:
            return f"the mean call moved {moved:.3f} µs, under {self.negligible_us} µs"
        if typical is not None and 1 / (1 + self.noise) <= typical <= 1 + self.noise:
            return f"{typical_text}, inside {band}: the change is in a few slow calls"
        if 1 / (1 + self.noise) <= self.ratio <= 1 + self.noise:
            return f"mean x{self.ratio:.3f} inside {band}"
        span = f"span of the runs x{self.interval.low:.3f}-x{self.interval.high:.3f}"
        within = self.interval.within
        if math.isinf(within):
            return f"{span}: 2 runs (or samples) on a side cannot show how far a third would be"
        if within > 1.0 + self.noise:
            return (
                f"{span} does not clear {band} and x{within:.3f}, how far one side's own runs "
                f"are apart: under {MIN_BLOCKS} runs a side, the sides must be further apart"
            )
        return (
            f"{span} does not clear {band}: under {MIN_BLOCKS} runs (or samples) a side, all "
            "must be apart"
        )

    @property
    def is_real(self) -> bool:
        """Whether the change is real: ``slower`` or ``faster`` (see :attr:`verdict`)."""
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
            "lower_quartile_ratio": self.lower_quartile_ratio,
            "reason": self.reason,
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
        processes: One change per process role of runs' merged traces (``rank 0`` matched to
            ``rank 0``): the time of its outermost markers. Empty for other traces.
        timelines: The busy timelines of each side's first trace, for the HTML page (not in
            :meth:`to_dict`).
        noise: The practical-equivalence band every verdict used (see :class:`Change`).
        negligible_us: The change of the mean call below which a change is ``same``.
        warnings: What the verdicts cannot show by themselves: a contended side, too few runs
            (see :mod:`.noise`).
    """

    before_paths: tuple[str, ...]
    after_paths: tuple[str, ...]
    overall: tuple[Change, ...]
    markers: tuple[Change, ...] = field(default_factory=tuple)
    cpu_ops: tuple[Change, ...] = field(default_factory=tuple)
    kernels: tuple[Change, ...] = field(default_factory=tuple)
    processes: tuple[Change, ...] = field(default_factory=tuple)
    timelines: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {})
    noise: float = NOISE
    negligible_us: float = 0.0
    warnings: tuple[str, ...] = ()

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
        """JSON-ready dict (the ``ncompass compare --json`` shape; ``processes`` only when a
        side holds a run's merged trace of several processes)."""
        values: dict[str, Any] = {
            "before": list(self.before_paths),
            "after": list(self.after_paths),
            "confidence": CONFIDENCE,
            "noise": self.noise,
            "negligible_us": self.negligible_us,
            "warnings": list(self.warnings),
            "overall": [change.to_dict() for change in self.overall],
            "biggest_changes": [change.to_dict() for change in self.biggest_changes()],
            "markers": [change.to_dict() for change in self.markers],
            "cpu_ops": [change.to_dict() for change in self.cpu_ops],
            "kernels": [change.to_dict() for change in self.kernels],
        }
        if self.processes:
            values["processes"] = [change.to_dict() for change in self.processes]
        return values

    def to_markdown(self, *, top: int = 20) -> str:
        """The report ``ncompass compare`` prints."""
        return render_comparison_markdown(self.to_dict(), top=top)

    def to_html(self, *, top: int = 50) -> str:
        """One self-contained HTML page (sortable tables, no network at view time)."""
        return render_comparison_html(self.to_dict(), top=top, timelines=self.timelines)

    def _repr_html_(self) -> str:
        return self.to_html()


_STEPS = "ProfilerStep#*"

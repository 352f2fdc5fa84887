"""What a comparison cannot see by itself: a contended side, and too few runs for a gate.

A verdict is only as good as the runs behind it. Two things make an unchanged program look
slower, and neither shows in one entry's interval:

- **Contention.** Another process took the CPU during one side's run. Preemption only ever adds
  time, so it stretches the slow calls and leaves the fastest ones alone: the ratio of an
  entry's mean call to its lower quartile grows. Entries differ in how much their calls vary
  (different shapes, cache states), so the two sides are compared entry by entry: when one
  side's calls spread markedly wider than the other's for the same entries, that side was
  contended.
- **One run a side.** The samples are then the calls of one run: the interval shows how much
  their mean would move within that run, not from one run to the next, and a gate on it judges
  the machine's mood that minute.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import median

from ncompass.analysis.comparison.result import Change

# An entry needs this many calls a side for its spread to say anything.
MIN_CALLS = 20
# One side's calls spreading this much wider than the other's (median over entries) is contention.
CONTENDED_SPREAD = 1.15
# Below this many runs a side the interval is the span from the fastest to the slowest run.
MIN_RUNS_FOR_INTERVAL = 5


def spread(mean_us: float, lower_quartile_us: float) -> float | None:
    """How far the mean call sits above the least disturbed quarter of the calls."""
    return mean_us / lower_quartile_us if lower_quartile_us > 0 else None


def contention_warnings(changes: Iterable[Change]) -> list[str]:
    """One line per side whose calls spread markedly wider than the other side's."""
    relative: list[float] = []
    for change in changes:
        before, after = change.before, change.after
        if before is None or after is None or min(before.samples, after.samples) < MIN_CALLS:
            continue
        spread_before = spread(before.mean_us, before.lower_quartile_us)
        spread_after = spread(after.mean_us, after.lower_quartile_us)
        if spread_before and spread_after:
            relative.append(spread_after / spread_before)
    if len(relative) < 3:
        return []
    typical = median(relative)
    for side, factor in (("after", typical), ("before", 1 / typical)):
        if factor >= CONTENDED_SPREAD:
            return [
                f"the {side} side looks contended: its calls spread {factor:.2f}x as wide as the "
                f"other side's (mean over lower quartile, median over {len(relative)} entries "
                f"with {MIN_CALLS}+ calls a side); another process probably took the CPU during "
                "its run, which makes it look slower. Run both sides on a quiet machine, or "
                "record several runs a side"
            ]
    return []


def run_count_warnings(runs_before: int, runs_after: int, threshold: float | None) -> list[str]:
    """A line when a side has fewer runs than an interval (and so a gate) needs."""
    fewest = min(runs_before, runs_after)
    if fewest >= MIN_RUNS_FOR_INTERVAL:
        return []
    gate = f"a {threshold:.0%} gate" if threshold is not None else "a gate"
    if fewest == 1:
        seen = "one run a side: intervals show how the calls of that run vary, not how runs do"
    else:
        seen = (
            f"{fewest} runs on a side: with fewer than {MIN_RUNS_FOR_INTERVAL} the interval is "
            "the span from the fastest to the slowest run"
        )
    return [f"{seen}; {gate} needs at least {runs_needed(threshold)} runs a side to be trusted"]


def runs_needed(threshold: float | None, run_to_run: float = 0.05) -> int:
    """Runs a side for a 95 % interval of a mean ratio narrower than the threshold.

    ``run_to_run`` is the spread of one run's time between runs (as a fraction). The interval's
    half-width is about ``1.96 * sqrt(2) * run_to_run / sqrt(n)``; it must stay under half the
    threshold. Never fewer than the runs a bootstrap interval needs.
    """
    if threshold is None or threshold <= 0:
        return MIN_RUNS_FOR_INTERVAL
    needed = math.ceil((2 * 1.96 * math.sqrt(2) * run_to_run / threshold) ** 2)
    return max(MIN_RUNS_FOR_INTERVAL, needed)


__all__ = [
    "CONTENDED_SPREAD",
    "MIN_RUNS_FOR_INTERVAL",
    "contention_warnings",
    "run_count_warnings",
    "runs_needed",
    "spread",
]

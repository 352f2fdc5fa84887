"""Is a change real? A seeded block bootstrap of the ratio of two means.

Each side's samples (per-call durations, in time order) are cut into at most ``MAX_BLOCKS``
contiguous blocks; a resample draws that many blocks with replacement on each side and
computes ``mean(after) / mean(before)``. Blocks keep neighbouring calls together, so slow
stretches (warm-up, a noisy neighbour) count as one draw instead of many independent ones, and
they keep the work per comparison bounded whatever the number of calls. When a side holds the
samples of several runs, each run is one block: the resamples then draw whole runs, and the
interval reflects how much runs differ, which the calls of one run cannot show. The percentile
interval of ``RESAMPLES`` draws is reported; with fewer than ``MIN_BLOCKS`` blocks a side it is
the span of the block means' ratios instead. A change can only be real when the interval
excludes 1 (the verdict asks more: see :attr:`~.result.Change.verdict`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter

MAX_BLOCKS = 32
RESAMPLES = 1000
CONFIDENCE = 0.95
SEED = 20_241_125


@dataclass(frozen=True)
class RatioInterval:
    """``after / before`` of the means and its bootstrap interval (``low`` <= ``high``).

    ``span`` is true when the interval is the span of the block means' ratios (fewer than
    ``MIN_BLOCKS`` blocks a side): a change then has to clear the noise band with that span
    (see :attr:`~.result.Change.verdict`).
    """

    ratio: float
    low: float
    high: float
    span: bool = False
    within: float = 1.0  # with ``span``: the widest side's slowest run over its fastest

    def holds_one(self) -> bool:
        """Whether no change (a ratio of exactly 1) is inside the interval."""
        return self.low <= 1.0 <= self.high


MIN_BLOCKS = 5
"""Blocks a side (runs, or samples) below which the bootstrap gives way to the span of ratios."""
MIN_SPREAD_BLOCKS = 3
"""Blocks a side below which the span never calls a change real (their spread is unknown)."""


def ratio_interval(
    before: Sequence[float],
    after: Sequence[float],
    *,
    before_runs: Sequence[int] = (),
    after_runs: Sequence[int] = (),
) -> RatioInterval | None:
    """The ratio of the means of ``after`` and ``before`` with its 95 % bootstrap interval.

    Args:
        before: Samples of the first side, in time order.
        after: Samples of the second side, in time order.
        before_runs: Where each run's samples start in ``before`` (from 0, increasing); with
            two runs or more, the runs are the blocks.
        after_runs: The same for ``after``.

    Returns:
        The ratio and its interval; None when a side has fewer than two samples or the
        ``before`` mean is not positive (no ratio to speak of).
    """
    if len(before) < 2 or len(after) < 2:
        return None
    before_sums, before_counts = _blocks(before, before_runs)
    after_sums, after_counts = _blocks(after, after_runs)
    before_total = sum(before_sums)
    if before_total <= 0:
        return None
    ratio = (sum(after_sums) / len(after)) / (before_total / len(before))
    if min(len(before_sums), len(after_sums)) < MIN_BLOCKS:
        return _span_of_ratios(
            ratio,
            (before_sums, before_counts, len(before_runs) >= 2),
            (after_sums, after_counts, len(after_runs) >= 2),
        )
    draws_before = _draws(len(before_sums), 0)
    draws_after = _draws(len(after_sums), 1)
    ratios: list[float] = []
    for pick_before, pick_after in zip(draws_before, draws_after, strict=True):
        mean_before = sum(pick_before(before_sums)) / sum(pick_before(before_counts))
        if mean_before <= 0:
            continue
        mean_after = sum(pick_after(after_sums)) / sum(pick_after(after_counts))
        ratios.append(mean_after / mean_before)
    if not ratios:
        return None
    ratios.sort()
    tail = (1.0 - CONFIDENCE) / 2
    low = ratios[int(tail * (len(ratios) - 1))]
    high = ratios[round((1.0 - tail) * (len(ratios) - 1))]
    return RatioInterval(ratio, min(low, ratio), max(high, ratio))


def _span_of_ratios(
    ratio: float,
    before: tuple[Sequence[float], Sequence[int], bool],
    after: tuple[Sequence[float], Sequence[int], bool],
) -> RatioInterval | None:
    """From the slowest to the fastest block of one side over the other's: with under
    MIN_BLOCKS blocks a side a bootstrap is far too narrow (3 against 3 has 10 distinct
    resamples a side), so the interval excludes 1 only when every block of one side is slower
    than every block of the other. For an unchanged program that order still comes up by
    chance, 1 time in 20 each way for 3 blocks against 3 (1 in 6 for 2 against 2), so the
    verdict asks the whole span to clear the noise band and ``within``, the widest spread of
    one side's own runs: what a side's runs spread over is not a change between sides.
    With under MIN_SPREAD_BLOCKS runs a side that spread is unknown: ``within`` is infinite.
    Each side is ``(block sums, block sizes, whether the blocks are runs)``."""
    before_sums, before_counts, before_runs = before
    after_sums, after_counts, after_runs = after
    before_means = [total / count for total, count in zip(before_sums, before_counts, strict=True)]
    after_means = [total / count for total, count in zip(after_sums, after_counts, strict=True)]
    if min(before_means) <= 0:
        return None
    low = min(after_means) / max(before_means)
    high = max(after_means) / min(before_means)
    within = 1.0
    for means, are_runs in ((before_means, before_runs), (after_means, after_runs)):
        if not are_runs:  # slices of one run: their spread is within the run (FEW_CALLS_EDGE)
            continue
        if len(means) < MIN_SPREAD_BLOCKS or min(means) <= 0:
            within = math.inf  # two runs say nothing of how far a third would be: never real
        else:
            within = max(within, max(means) / min(means))

    return RatioInterval(ratio, min(low, ratio), max(high, ratio), span=True, within=within)


def _blocks(samples: Sequence[float], runs: Sequence[int]) -> tuple[list[float], list[int]]:
    """Sums and sizes of at most MAX_BLOCKS contiguous blocks: the runs when there are two or
    more (consecutive runs grouped beyond MAX_BLOCKS), else near-equal slices."""
    count = len(samples)
    if len(runs) >= 2:
        groups = min(len(runs), MAX_BLOCKS)
        starts = [runs[index * len(runs) // groups] for index in range(groups)]
        bounds = [*starts, count]
        blocks = groups
    else:
        blocks = min(count, MAX_BLOCKS)
        bounds = [index * count // blocks for index in range(blocks + 1)]
    sums = [sum(samples[bounds[index] : bounds[index + 1]]) for index in range(blocks)]
    sizes = [bounds[index + 1] - bounds[index] for index in range(blocks)]
    return sums, sizes


@lru_cache(maxsize=2 * MAX_BLOCKS)
def _draws(blocks: int, side: int) -> tuple[itemgetter[tuple[float, ...]], ...]:
    """RESAMPLES draws of ``blocks`` block indices, the same for every comparison (seeded).

    Each draw is an ``itemgetter`` picking its blocks (a tuple, as ``blocks`` >= 2), which
    halves the time of a resample against indexing in a Python loop.
    """
    generator = random.Random(SEED * 1_000 + blocks * 2 + side)
    choices = range(blocks)
    return tuple(itemgetter(*generator.choices(choices, k=blocks)) for _ in range(RESAMPLES))

"""A compact description of a set of measurements: count, mean, median, p95, max."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from ncompass.analysis import _native


@dataclass(frozen=True)
class Distribution:
    """Summary statistics of a set of durations in microseconds (all 0.0 when empty)."""

    count: int = 0
    mean: float = 0.0
    median: float = 0.0
    p95: float = 0.0
    max: float = 0.0

    @classmethod
    def of(cls, values: Iterable[float]) -> Distribution:
        """Summarise ``values``.

        Args:
            values: Measurements in any order.

        Returns:
            Their distribution; nearest-rank percentiles.
        """
        return cls._of_sorted(sorted(values))

    @classmethod
    def of_column(cls, values: array[float]) -> Distribution:
        """:meth:`of` an array of doubles, sorted in place by the C sweep where it can be (no list
        of 32 bytes a value); the same statistics to the last bit.

        Args:
            values: Measurements in any order; reordered.

        Returns:
            Their distribution.
        """
        sweep = _native.sweep
        if sweep is not None and sweep.sort_doubles(values):
            return cls._of_sorted(values)
        return cls.of(values)

    @classmethod
    def _of_sorted(cls, ordered: Sequence[float]) -> Distribution:
        if not ordered:
            return cls()
        count = len(ordered)
        return cls(
            count=count,
            mean=sum(ordered) / count,
            median=_nearest_rank(ordered, 0.5),
            p95=_nearest_rank(ordered, 0.95),
            max=ordered[-1],
        )

    def to_dict(self) -> dict[str, float]:
        """The statistics as a JSON-ready dict."""
        return asdict(self)


def _nearest_rank(ordered: Sequence[float], quantile: float) -> float:
    # round() first so that 0.95 * 20 counts as 19, not 19.000000000000004
    rank = math.ceil(round(quantile * len(ordered), 9))
    return ordered[min(max(rank, 1), len(ordered)) - 1]

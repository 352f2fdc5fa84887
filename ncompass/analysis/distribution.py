"""A compact description of a set of measurements: count, mean, median, p95, max."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass


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
        ordered = sorted(values)
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


def _nearest_rank(ordered: list[float], quantile: float) -> float:
    # round() first so that 0.95 * 20 counts as 19, not 19.000000000000004
    rank = math.ceil(round(quantile * len(ordered), 9))
    return ordered[min(max(rank, 1), len(ordered)) - 1]

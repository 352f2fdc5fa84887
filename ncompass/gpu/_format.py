"""The utilisation sparkline: percentages drawn as block characters."""

from __future__ import annotations

import math
from collections.abc import Sequence

SPARK_LEVELS = "▁▂▃▄▅▆▇█"
SPARK_MISSING = "·"
SPARK_WIDTH = 40


def sparkline(percents: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """Draws percentages (0-100, NaN for no data) as at most ``width`` block characters.

    Longer series are cut into ``width`` equal slices, each drawn at its mean.
    """
    count = len(percents)
    if count == 0 or all(math.isnan(value) for value in percents):
        return ""
    slices = min(width, count)
    characters = []
    for slice_index in range(slices):
        chunk = percents[slice_index * count // slices : (slice_index + 1) * count // slices]
        values = [value for value in chunk if not math.isnan(value)]
        if not values:
            characters.append(SPARK_MISSING)
            continue
        level = sum(values) / len(values) / 100.0 * (len(SPARK_LEVELS) - 1)
        characters.append(SPARK_LEVELS[min(len(SPARK_LEVELS) - 1, max(0, round(level)))])
    return "".join(characters)


__all__ = ["SPARK_LEVELS", "SPARK_MISSING", "SPARK_WIDTH", "sparkline"]

"""Byte counts and durations as people read them, one convention for all of ncompass.

Sizes are in binary units (``KiB``, ``MiB``, ``GiB``, ``TiB``: powers of 1024), the units the
limits are counted in (``--max-upload-mb 100`` is 100 MiB). Durations go from ``µs`` to ``ms``
to ``s`` and stay in seconds past a minute: the narrative checker (and a reader comparing two
numbers) reads every duration in one of these three units.

Standard library only: every package may import this module, the cluster-side launcher too.
"""

from __future__ import annotations

from typing import Literal

DurationUnit = Literal["µs", "ms", "s"]

MIB = 1 << 20

_SIZE_UNITS = (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40))
_DURATION_UNITS: tuple[tuple[DurationUnit, float, int], ...] = (
    ("µs", 1.0, 1),
    ("ms", 1e3, 2),
    ("s", 1e6, 2),
)


def format_size(n_bytes: float, *, decimals: int = 1) -> str:
    """``0 B``, ``1023 B``, ``1.0 KiB``, ``1.5 GiB``: the largest unit that keeps the number
    under 1024.

    Args:
        n_bytes: The size.
        decimals: Digits after the point (``decimals=0`` for limits: ``16 MiB``).
    """
    if abs(n_bytes) < 1024:
        return f"{int(n_bytes)} B"
    for unit, scale in _SIZE_UNITS:
        value = n_bytes / scale
        if abs(round(value, decimals)) < 1024 or unit == _SIZE_UNITS[-1][0]:
            break
    return f"{value:.{decimals}f} {unit}"


def format_duration(
    microseconds: float, *, unit: DurationUnit | None = None, decimals: int | None = None
) -> str:
    """``850.0 µs``, ``12.30 ms``, ``4.56 s``: the largest unit that keeps the number at least 1.

    Args:
        microseconds: The duration (negative for a difference).
        unit: Always this unit, for a column read top to bottom (default: the one that fits).
        decimals: Digits after the point (default: 1 for µs, 2 for ms and s).
    """
    for name, scale, digits in reversed(_DURATION_UNITS):  # ends on µs if nothing fits
        if decimals is not None:
            digits = decimals
        if name == unit or (unit is None and abs(round(microseconds / scale, digits)) >= 1):
            break
    return f"{microseconds / scale:.{digits}f} {name}"


__all__ = ["MIB", "DurationUnit", "format_duration", "format_size"]

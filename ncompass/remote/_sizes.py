"""Byte counts as people read them in messages."""

from __future__ import annotations

MB = 1_000_000


def format_size(size: float) -> str:
    """``532 B``, ``12.3 kB``, ``4.1 MB``, ``1.20 GB`` (decimal units, like ``ls -h --si``)."""
    if size < 1_000:
        return f"{int(size)} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6)):
        if size < scale * 1_000:
            return f"{size / scale:.1f} {unit}"
    return f"{size / 1e9:.2f} GB"


__all__ = ["MB", "format_size"]

"""The timeline from where the program starts working: setup folded away, one click to show it.

A run's first seconds are often imports and model construction with nothing profiled in them;
drawn to scale, they squeezed the steady state into the right tenth of the page. When the bins
before the first busy bin or marker range are more than ``FOLD_SHARE`` of the timeline, the
page draws the timeline from there (the same bins, fewer of them) and keeps the whole run one
click away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FOLD_SHARE = 0.5  # a leading idle stretch wider than this share of the run is folded


def first_active_bin(timeline: Mapping[str, Any]) -> int:
    """The first bin with busy time or a marker range (0 when there is none)."""
    busy: list[float] = timeline.get("busy") or []
    starts = [first for lane in timeline.get("lanes") or [] for first, _ in lane["ranges"]]
    candidates = [index for index, share in enumerate(busy) if share > 0][:1]
    candidates += [int(min(starts))] if starts else []
    return min(candidates) if candidates else 0


def steady_timeline(timeline: Mapping[str, Any]) -> tuple[dict[str, Any], float] | None:
    """The timeline without its leading idle bins and the time folded (µs); None when that
    stretch is at most ``FOLD_SHARE`` of the run (the whole run is drawn as it is)."""
    busy: list[float] = timeline.get("busy") or []
    first = first_active_bin(timeline)
    if not busy or first <= FOLD_SHARE * len(busy):
        return None
    bin_us = (timeline["end_us"] - timeline["start_us"]) / len(busy)
    folded = first * bin_us
    cropped = dict(timeline)
    cropped["busy"] = busy[first:]
    cropped["start_us"] = timeline["start_us"] + folded
    cropped["lanes"] = [
        {**lane, "ranges": [[max(a - first, 0.0), b - first] for a, b in lane["ranges"]]}
        for lane in timeline.get("lanes") or []
    ]
    return cropped, folded

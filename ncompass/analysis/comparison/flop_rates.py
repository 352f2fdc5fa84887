"""Achieved FLOP/s before and after a change, per marker (traces recorded with shapes).

Time alone says whether a change made a marker faster; the achieved rate says whether it now
does its work closer to the machine's limit, or simply less work. Only the work figures are
needed here: no peaks, so no calibration.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ncompass.analysis.roofline import work_figures


def _side(paths: Iterable[str | Path]) -> dict[str, tuple[float, float]] | None:
    """Marker name -> (FLOPs, seconds) pooled over a side's traces (None: no shapes)."""
    pooled: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    shaped = False
    for path in paths:
        report = work_figures(path)
        if report is None:
            continue
        shaped = True
        for name, work in report.markers.items():
            pooled[name][0] += work.total_flops
            pooled[name][1] += work.seconds
    return {name: (flops, seconds) for name, (flops, seconds) in pooled.items()} if shaped else None


def flop_rate_changes(
    before: Iterable[str | Path], after: Iterable[str | Path]
) -> list[dict[str, Any]] | None:
    """Per marker on both sides with FLOPs: achieved FLOP/s before, after, and their ratio,
    largest change first; None when either side was recorded without shapes."""
    first, second = _side(before), _side(after)
    if first is None or second is None:
        return None
    rows: list[dict[str, Any]] = []
    for name in first.keys() & second.keys():
        (flops_a, seconds_a), (flops_b, seconds_b) = first[name], second[name]
        if not (flops_a and flops_b and seconds_a > 0 and seconds_b > 0):
            continue
        rate_a, rate_b = flops_a / seconds_a, flops_b / seconds_b
        rows.append(
            {
                "name": name,
                "before_flops_per_s": rate_a,
                "after_flops_per_s": rate_b,
                "ratio": rate_b / rate_a,
                "before_flops": flops_a,
                "after_flops": flops_b,
            }
        )
    rows.sort(key=lambda row: -abs(row["ratio"] - 1.0))
    return rows


def flop_rate_markdown(rows: list[dict[str, Any]] | None, top: int = 20) -> str:
    """The "Achieved FLOP/s" section of ``ncompass compare`` ('' without figures)."""
    if not rows:
        return ""
    lines = [
        "## Achieved FLOP/s",
        "",
        "| marker | before | after | change | FLOPs after / before |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows[:top]:
        work = row["after_flops"] / row["before_flops"]
        lines.append(
            f"| `{row['name']}` | {row['before_flops_per_s']:.3g} | "
            f"{row['after_flops_per_s']:.3g} | {row['ratio']:.2f}x | {work:.2f}x |"
        )
    return "\n".join([*lines, ""]) + "\n"


__all__ = ["flop_rate_changes", "flop_rate_markdown"]

"""The bound of the statement an answer names: its marker's roofline figures, in words."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from ncompass.analysis.roofline import Work, efficiency_report
from ncompass.errors import NcompassError


def marker_efficiency(trace_path: str | Path, names: Collection[str]) -> dict[str, Any] | None:
    """The efficiency figures of the markers ``names`` together (None: no shapes recorded, or
    no peaks for the device)."""
    try:
        report = efficiency_report(trace_path)
    except NcompassError:  # a bad NCOMPASS_PEAK_* value: the answer stands without a bound
        return None
    if report is None or report.device is None:
        return None
    together = Work()
    for name in names:
        work = report.markers.get(name)
        if work is None:
            continue
        for dtype, flops in work.flops.items():
            together.flops[dtype] += flops
        together.tensor_flops += work.tensor_flops
        together.bytes += work.bytes
        together.seconds += work.seconds
        together.cpu_seconds += work.cpu_seconds
    if together.seconds <= 0 or not (together.total_flops or together.bytes):
        return None
    row = report.efficiency(together)
    return row if row.get("bound") is not None else None


def bound_phrase(efficiency: dict[str, Any] | None) -> str:
    """``; memory-bound, 12% of peak bandwidth`` ('' without figures)."""
    if not efficiency or efficiency.get("bound") is None:
        return ""
    share = 100 * float(efficiency.get("of_peak") or 0.0)
    peak = {"compute": "peak FLOP/s", "memory": "peak bandwidth"}.get(
        str(efficiency["bound"]), "its roofline"
    )
    return f"; {efficiency['bound']}-bound, {share:.0f}% of {peak}"


__all__ = ["bound_phrase", "marker_efficiency"]

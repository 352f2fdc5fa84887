"""The efficiency figures in words: the markdown's "Efficiency" section and its table cells."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ncompass._format import format_duration

NO_SHAPES = (
    "No efficiency figures: this trace was recorded without shapes (no `Input Dims` on its "
    "operators). Record with `ncompass run --record-shapes` (torch profiler "
    "`record_shapes=True`) to get FLOPs, bytes, the bound and the share of peak."
)


def efficiency_cell(row: Mapping[str, Any]) -> str:
    """``memory 12%``: a row's bound and share of the roofline ('' without figures)."""
    efficiency = row.get("efficiency")
    if not efficiency or efficiency.get("bound") is None:
        return ""
    return f"{efficiency['bound']} {efficiency['of_peak']:.0%}"


def has_efficiency(rows: Any) -> bool:
    """Whether any of the rows has a bound to show."""
    return any(efficiency_cell(row) for row in rows)


def _rate(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def efficiency_lines(structured: Mapping[str, Any]) -> list[str]:
    """The "Efficiency" section: the device's peaks and where they came from, MFU, and the
    marker with the most time left on the table (time × (1 − share of roofline))."""
    if "device" not in structured:
        return []
    if structured.get("efficiency_note"):
        return ["## Efficiency", "", str(structured["efficiency_note"]), ""]
    device = structured.get("device")
    lines = ["## Efficiency", ""]
    if device is None:
        lines.append(
            "Efficiency: FLOPs and bytes are counted, but this device has no peaks in the table: "
            "pass `--peak-flops` and `--peak-bandwidth` (or `--calibrate` on this machine) to "
            "get the bound and the share of peak."
        )
    else:
        peaks = ", ".join(
            f"{dtype} {_rate(value, 'FLOP/s')}"
            for dtype, value in device["peak_flops_per_s"].items()
        )
        raised = (
            " (raised to what the trace itself reached)" if device.get("raised_to_observed") else ""
        )
        lines.append(
            f"Device {device['name']} ({device['kind']}): peaks {peaks}, "
            f"{_rate(device['peak_bytes_per_s'], 'B/s')}; source: {device['source']}, "
            f"{device.get('note', '')}{raised}."
        )
    mfu = structured.get("mfu")
    if mfu:
        share = (
            "" if mfu.get("mfu") is None else f", MFU {mfu['mfu']:.1%} of the {mfu['dtype']} peak"
        )
        steps = f" over {mfu['steps']} steps" if mfu["steps"] else ""
        lines.append(
            f"Model FLOPs {mfu['model_flops']:.3g} ({mfu['flops_per_step']:.3g} per step{steps})"
            f"{share}."
        )
    worst = _most_left([row for row in structured.get("markers", [])])
    if worst is not None:
        efficiency = worst["efficiency"]
        lines.append(
            f"Most time left on the table: `{worst['name']}`, {efficiency['bound']}-bound at "
            f"{efficiency['of_peak']:.0%} of its roofline "
            f"({format_duration(efficiency['time_left_us'])} above the roof)."
        )
    return [*lines, ""]


def _most_left(markers: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The marker with the most time above its roofline, among markers that spend most of
    their time themselves: an enclosing marker's inclusive figures would always win."""
    candidates = [
        row
        for row in markers
        if (row.get("efficiency") or {}).get("time_left_us") is not None
        and row.get("cpu_self_us", 0.0) >= 0.5 * row.get("cpu_total_us", 0.0)
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda row: row["efficiency"]["time_left_us"])


__all__ = ["NO_SHAPES", "efficiency_cell", "efficiency_lines", "has_efficiency"]

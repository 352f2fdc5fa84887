"""Human-readable output: the summary report and the utilisation sparkline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ncompass.gpu._sample import HOST_DEVICE

if TYPE_CHECKING:
    from ncompass.gpu._summary import GpuSummary

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


def format_summary(summary: GpuSummary) -> str:
    """The multi-line report ``GpuSummary.format()`` returns."""
    host = summary.device == HOST_DEVICE
    title = summary.name if host else f"GPU {summary.device} · {summary.name}"
    lines = [f"{title} ({summary.backend})"]
    timing = f"{summary.duration_s:.2f} s"
    if summary.warmup_s > 0:
        timing += f", first {summary.warmup_s:.2f} s excluded"
    if summary.backend != "none":
        timing += f" · {summary.sample_count} samples every {summary.interval_s:g} s"
    if summary.missing_samples:
        timing += f", {summary.missing_samples} without data"
    rows = [("time", timing)]
    if summary.util_gpu_mean is not None:
        rows.append(
            (
                "cpu util" if host else "util",
                f"mean {_pct(summary.util_gpu_mean)}  p50 {_pct(summary.util_gpu_p50)}  "
                f"p95 {_pct(summary.util_gpu_p95)}  max {_pct(summary.util_gpu_max)}",
            )
        )
    if summary.util_mem_mean is not None:
        rows.append(("mem util", f"mean {_pct(summary.util_mem_mean)}"))
    if summary.memory_used_max_bytes is not None:
        memory = f"max {_bytes(summary.memory_used_max_bytes)}"
        if summary.memory_total_bytes is not None:
            memory += f" of {_bytes(summary.memory_total_bytes)}"
        rows.append(("memory", memory))
    if summary.power_mean_w is not None and summary.power_max_w is not None:
        rows.append(
            ("power", f"mean {summary.power_mean_w:.1f} W  max {summary.power_max_w:.1f} W")
        )
    if summary.energy_j is not None:
        source = "estimate from power samples" if summary.energy_estimated else "energy counter"
        rows.append(("energy", f"{_joules(summary.energy_j)} ({source})"))
    if summary.temperature_max_c is not None:
        rows.append(("temp", f"max {summary.temperature_max_c:.0f} °C"))
    if summary.busy_time_s is not None:
        rows.append(("busy", f"≈{summary.busy_time_s:.2f} s of {summary.measured_s:.2f} s"))
    if summary.sparkline:
        rows.append(("timeline", summary.sparkline))
    lines += [f"  {label:<9} {text}" for label, text in rows]
    lines += [f"  note: {note}" for note in summary.notes]
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _bytes(value: int) -> str:
    gib = value / 1024**3
    return f"{gib:.1f} GiB" if gib >= 1 else f"{value / 1024**2:.0f} MiB"


def _joules(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f} MJ"
    if value >= 1e3:
        return f"{value / 1e3:.2f} kJ"
    return f"{value:.1f} J"

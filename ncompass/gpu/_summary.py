"""Statistics over a monitored region: ``GpuSummary`` and the accumulator that builds it.

The accumulator keeps only what the statistics need (the utilisation series as 8-byte floats for
percentiles and the sparkline, running sums and maxima for the rest), so a monitor that does not
keep its samples stays small over a long run.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ncompass._format import format_size
from ncompass.gpu._backends.base import DeviceInfo
from ncompass.gpu._format import sparkline
from ncompass.gpu._sample import HOST_DEVICE, GpuSample

_Number = TypeVar("_Number", int, float)
RATE_SHORTFALL = 0.9
"""A summary notes a sampling rate below this share of the one asked for."""


@dataclass(frozen=True)
class GpuSummary:
    """Aggregate statistics of one device over a monitored region.

    Statistics cover the samples taken after ``warmup_s``; a statistic is ``None`` when the device
    never reported that metric. Utilisation percentiles interpolate linearly between samples.

    Attributes:
        device: The device index (``-1``: the host CPU of the ``cpu`` backend).
        name: The device name.
        backend: The backend that produced the samples (``nvml``, ``smi``, ``cpu``, ``none``).
        duration_s: Wall time of the whole region, including warm-up and ``sync_fn``.
        warmup_s: The excluded warm-up.
        measured_s: The part of the region the statistics cover.
        interval_s: The sampling period.
        sample_count: Samples with data after warm-up.
        missing_samples: Samples after warm-up for which the device gave no data.
        util_gpu_mean: Mean utilisation, percent.
        util_gpu_p50: Median utilisation, percent.
        util_gpu_p95: 95th percentile of utilisation, percent.
        util_gpu_max: Maximum utilisation, percent.
        util_mem_mean: Mean memory-controller utilisation, percent.
        memory_used_max_bytes: Peak memory in use.
        memory_total_bytes: Memory size.
        power_mean_w: Mean power draw, watts.
        power_max_w: Peak power draw, watts.
        temperature_max_c: Peak temperature, degrees Celsius.
        energy_j: Energy between the first and last sample after warm-up, joules.
        energy_estimated: True when ``energy_j`` integrates power samples; False when it comes
            from the device's energy counter.
        busy_time_s: Estimated time the device was busy: mean utilisation × ``measured_s``.
        sparkline: The utilisation over time, one character per slice (``·``: no data).
        notes: What the user should know: fallbacks, unsupported metrics, lost devices, a
            sampling rate short of the one asked for.
        sample_rate_hz: Samples taken a second after warm-up (``None`` for backend ``none``
            or a region too short to tell); ``1 / interval_s`` when sampling kept time.
    """

    device: int
    name: str
    backend: str
    duration_s: float
    warmup_s: float
    measured_s: float
    interval_s: float
    sample_count: int
    missing_samples: int
    util_gpu_mean: float | None
    util_gpu_p50: float | None
    util_gpu_p95: float | None
    util_gpu_max: float | None
    util_mem_mean: float | None
    memory_used_max_bytes: int | None
    memory_total_bytes: int | None
    power_mean_w: float | None
    power_max_w: float | None
    temperature_max_c: float | None
    energy_j: float | None
    energy_estimated: bool
    busy_time_s: float | None
    sparkline: str
    notes: tuple[str, ...] = ()
    sample_rate_hz: float | None = None

    def format(self) -> str:
        """A readable multi-line report."""
        return format_summary(self)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (``notes`` as a list)."""
        data = dataclasses.asdict(self)
        data["notes"] = list(self.notes)
        return data


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of sorted values, interpolating linearly between ranks.

    The same definition as NumPy's default (``method="linear"``).
    """
    if not sorted_values:
        raise ValueError("percentile of no values")
    position = (len(sorted_values) - 1) * fraction
    lower = math.floor(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    weight = position - lower
    return sorted_values[lower] * (1.0 - weight) + sorted_values[upper] * weight


class SummaryAccumulator:
    """Collects one device's samples and turns them into a ``GpuSummary``.

    Args:
        device: The device the samples come from.
        window_start_ns: Samples before this ``monotonic_ns`` are warm-up and not counted.
    """

    def __init__(self, device: DeviceInfo, window_start_ns: int) -> None:
        self.device = device
        self._window_start_ns = window_start_ns
        self._util = array("d")  # in time order; NaN where the device gave no data at all
        self._sample_count = 0
        self._missing = 0
        self._util_mem_sum = 0.0
        self._util_mem_count = 0
        self._memory_used_max: int | None = None
        self._memory_total = device.memory_total_bytes
        self._power_sum = 0.0
        self._power_count = 0
        self._power_max: float | None = None
        self._temperature_max: float | None = None
        self._energy_first: float | None = None
        self._energy_last: float | None = None
        self._energy_readings = 0
        self._power_joules = 0.0
        self._power_span_ns = 0
        self._last_power: tuple[int, float] | None = None  # (monotonic_ns, watts)

    def add(self, sample: GpuSample) -> None:
        """Counts one sample of this device (ignored when it falls in the warm-up)."""
        if sample.monotonic_ns < self._window_start_ns:
            return
        if not sample.has_data:
            self._missing += 1
            self._util.append(math.nan)
            self._last_power = None  # do not integrate power across a gap
            return
        self._sample_count += 1
        if sample.util_gpu is not None:  # e.g. the cpu backend's first sample has none yet
            self._util.append(sample.util_gpu)
        if sample.util_mem is not None:
            self._util_mem_sum += sample.util_mem
            self._util_mem_count += 1
        if sample.memory_used_bytes is not None:
            self._memory_used_max = _max(self._memory_used_max, sample.memory_used_bytes)
        if sample.memory_total_bytes is not None:
            self._memory_total = sample.memory_total_bytes
        if sample.temperature_c is not None:
            self._temperature_max = _max(self._temperature_max, sample.temperature_c)
        if sample.energy_j is not None:
            self._energy_readings += 1
            if self._energy_first is None:
                self._energy_first = sample.energy_j
            self._energy_last = sample.energy_j
        self._add_power(sample)

    def _add_power(self, sample: GpuSample) -> None:
        if sample.power_w is None:
            self._last_power = None
            return
        self._power_sum += sample.power_w
        self._power_count += 1
        self._power_max = _max(self._power_max, sample.power_w)
        if self._last_power is not None:
            last_ns, last_w = self._last_power
            span_ns = sample.monotonic_ns - last_ns
            self._power_joules += (last_w + sample.power_w) / 2 * span_ns / 1e9  # trapezoid
            self._power_span_ns += span_ns
        self._last_power = (sample.monotonic_ns, sample.power_w)

    def finish(
        self,
        *,
        backend: str,
        duration_s: float,
        warmup_s: float,
        interval_s: float,
        notes: Sequence[str] = (),
    ) -> GpuSummary:
        """The summary of everything added so far."""
        measured_s = max(0.0, duration_s - warmup_s)
        utils = sorted(value for value in self._util if not math.isnan(value))
        util_mean = math.fsum(utils) / len(utils) if utils else None
        energy_j, estimated = self._energy()
        all_notes = list(notes)
        rate = achieved_rate(self._sample_count, measured_s)
        if backend != "none" and rate is not None and rate < RATE_SHORTFALL / interval_s:
            all_notes.append(
                f"sampled {rate:.1f} times a second of the {1 / interval_s:g} asked for (a busy "
                "machine, or code holding the GIL longer than the interval)"
            )
        if duration_s < warmup_s:
            all_notes.append(f"the region ({duration_s:.2f} s) was shorter than the warm-up")
        return GpuSummary(
            device=self.device.index,
            name=self.device.name,
            backend=backend,
            duration_s=duration_s,
            warmup_s=warmup_s,
            measured_s=measured_s,
            interval_s=interval_s,
            sample_count=self._sample_count,
            missing_samples=self._missing,
            util_gpu_mean=util_mean,
            util_gpu_p50=percentile(utils, 0.50) if utils else None,
            util_gpu_p95=percentile(utils, 0.95) if utils else None,
            util_gpu_max=utils[-1] if utils else None,
            util_mem_mean=(
                self._util_mem_sum / self._util_mem_count if self._util_mem_count else None
            ),
            memory_used_max_bytes=self._memory_used_max,
            memory_total_bytes=self._memory_total,
            power_mean_w=self._power_sum / self._power_count if self._power_count else None,
            power_max_w=self._power_max,
            temperature_max_c=self._temperature_max,
            energy_j=energy_j,
            energy_estimated=estimated,
            busy_time_s=util_mean / 100.0 * measured_s if util_mean is not None else None,
            sparkline=sparkline(self._util),
            notes=tuple(all_notes),
            sample_rate_hz=rate if backend != "none" else None,
        )

    def _energy(self) -> tuple[float | None, bool]:
        first, last = self._energy_first, self._energy_last
        # a counter that went backwards was reset (driver reload): integrate power instead
        if first is not None and last is not None and self._energy_readings > 1 and last >= first:
            return last - first, False
        if self._power_span_ns > 0:
            return self._power_joules, True
        return None, False


def achieved_rate(sample_count: int, measured_s: float) -> float | None:
    """Samples a second over the measured time: the intervals between the samples (the first
    is taken at the start, the last at the end), or None when too short to tell."""
    if sample_count < 2 or measured_s <= 0:
        return None
    return (sample_count - 1) / measured_s


def _max(current: _Number | None, value: _Number) -> _Number:
    return value if current is None or value > current else current


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
        if summary.sample_rate_hz is not None:
            timing += f" ({summary.sample_rate_hz:.1f}/s of {1 / summary.interval_s:g}/s asked)"
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
        memory = f"max {format_size(summary.memory_used_max_bytes)}"
        if summary.memory_total_bytes is not None:
            memory += f" of {format_size(summary.memory_total_bytes)}"
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


def _joules(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f} MJ"
    if value >= 1e3:
        return f"{value / 1e3:.2f} kJ"
    return f"{value:.1f} J"

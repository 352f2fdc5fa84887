"""The readable report and the sparkline."""

from __future__ import annotations

import math

from ncompass.gpu import GpuSummary
from ncompass.gpu._format import sparkline
from ncompass.gpu._summary import format_summary


def make_summary(**changes: object) -> GpuSummary:
    fields: dict[str, object] = {
        "device": 0,
        "name": "NVIDIA A100-SXM4-80GB",
        "backend": "nvml",
        "duration_s": 12.4,
        "warmup_s": 1.0,
        "measured_s": 11.4,
        "interval_s": 0.2,
        "sample_count": 57,
        "missing_samples": 0,
        "util_gpu_mean": 87.3,
        "util_gpu_p50": 91.0,
        "util_gpu_p95": 99.0,
        "util_gpu_max": 100.0,
        "util_mem_mean": 41.2,
        "memory_used_max_bytes": 31 * 1024**3,
        "memory_total_bytes": 80 * 1024**3,
        "power_mean_w": 312.4,
        "power_max_w": 398.0,
        "temperature_max_c": 67.0,
        "energy_j": 3520.0,
        "energy_estimated": False,
        "busy_time_s": 9.95,
        "sparkline": "▁▃▇██",
        "notes": (),
    }
    fields.update(changes)
    return GpuSummary(**fields)  # type: ignore[arg-type]


def test_sparkline_draws_levels_from_zero_to_full() -> None:
    assert sparkline([0, 14.3, 28.6, 42.9, 57.1, 71.4, 85.7, 100]) == "▁▂▃▄▅▆▇█"


def test_sparkline_averages_long_series_into_the_width() -> None:
    line = sparkline([0.0] * 50 + [100.0] * 50, width=10)
    assert line == "▁▁▁▁▁█████"


def test_sparkline_marks_slices_without_data_and_is_empty_without_any() -> None:
    assert sparkline([100, math.nan, 0]) == "█·▁"
    assert sparkline([]) == "" and sparkline([math.nan]) == ""


def test_report_shows_every_statistic() -> None:
    text = make_summary().format()
    assert text.splitlines()[0] == "GPU 0 · NVIDIA A100-SXM4-80GB (nvml)"
    for expected in [
        "12.40 s, first 1.00 s excluded · 57 samples every 0.2 s",
        "mean 87.3%  p50 91.0%  p95 99.0%  max 100.0%",
        "mem util  mean 41.2%",
        "max 31.0 GiB of 80.0 GiB",
        "mean 312.4 W  max 398.0 W",
        "3.52 kJ (energy counter)",
        "max 67 °C",
        "≈9.95 s of 11.40 s",
        "▁▃▇██",
    ]:
        assert expected in text


def test_report_leaves_out_what_the_device_does_not_report_and_shows_notes() -> None:
    text = make_summary(
        power_mean_w=None,
        power_max_w=None,
        energy_j=None,
        util_mem_mean=None,
        notes=("power not supported by this GPU",),
    ).format()
    labels = [line.split()[0] for line in text.splitlines()[1:]]
    assert labels == ["time", "util", "memory", "temp", "busy", "timeline", "note:"]
    assert text.endswith("note: power not supported by this GPU")


def test_estimated_energy_is_labelled() -> None:
    text = make_summary(energy_j=512.0, energy_estimated=True).format()
    assert "512.0 J (estimate from power samples)" in text


def test_cpu_and_none_reports() -> None:
    cpu = make_summary(device=-1, name="host CPU, process tree (2 cores)", backend="cpu").format()
    assert cpu.splitlines()[0] == "host CPU, process tree (2 cores) (cpu)"
    assert "cpu util" in cpu
    unsampled = "util_gpu_mean util_mem_mean memory_used_max_bytes power_mean_w energy_j"
    nothing = dict.fromkeys([*unsampled.split(), "temperature_max_c", "busy_time_s"])
    none = make_summary(
        name="not sampled", backend="none", warmup_s=0.0, sample_count=0, sparkline="", **nothing
    ).format()
    assert none == "GPU 0 · not sampled (none)\n  time      12.40 s"


def test_format_summary_is_what_format_returns() -> None:
    summary = make_summary()
    assert format_summary(summary) == summary.format()

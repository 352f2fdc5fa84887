"""Statistics: percentiles, warm-up exclusion, energy, busy time, JSON."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ncompass.gpu import GpuSample, GpuSummary
from ncompass.gpu._backends.base import DeviceInfo
from ncompass.gpu._summary import SummaryAccumulator, percentile

DEVICE = DeviceInfo(0, "NVIDIA A100-SXM4-80GB", 80 * 1024**3)
S = 1_000_000_000


def sample(t_s: float, **metrics: float | int | None) -> GpuSample:
    ns = round(t_s * S)
    return GpuSample(device=0, time_ns=1_700_000_000 * S + ns, monotonic_ns=ns, **metrics)  # type: ignore[arg-type]


def summarise(
    samples: list[GpuSample], *, warmup_s: float = 0.0, duration_s: float = 10.0
) -> GpuSummary:
    accumulator = SummaryAccumulator(DEVICE, window_start_ns=round(warmup_s * S))
    for each in samples:
        accumulator.add(each)
    return accumulator.finish(
        backend="nvml", duration_s=duration_s, warmup_s=warmup_s, interval_s=0.2
    )


@given(st.lists(st.floats(min_value=0, max_value=100), min_size=2, max_size=200))
def test_percentiles_match_the_standard_library(values: list[float]) -> None:
    ordered = sorted(values)
    cut_points = statistics.quantiles(values, n=100, method="inclusive")
    assert percentile(ordered, 0.50) == pytest.approx(statistics.median(values), abs=1e-9)
    assert percentile(ordered, 0.95) == pytest.approx(cut_points[94], abs=1e-9)
    assert percentile(ordered, 0.0) == ordered[0] and percentile(ordered, 1.0) == ordered[-1]


def test_utilisation_statistics_against_a_hand_computation() -> None:
    utils = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    summary = summarise([sample(0.2 * i, util_gpu=u) for i, u in enumerate(utils)])
    assert summary.util_gpu_mean == 50.0
    assert summary.util_gpu_p50 == 50.0
    assert summary.util_gpu_p95 == pytest.approx(95.0)  # rank 9.5 of 0..10: halfway 90 → 100
    assert summary.util_gpu_max == 100.0
    assert summary.sample_count == 11
    assert summary.busy_time_s == pytest.approx(0.5 * 10.0)


def test_warmup_samples_are_left_out_of_every_statistic() -> None:
    hot = {"util_gpu": 100, "power_w": 400, "temperature_c": 90, "memory_used_bytes": 9 * 2**30}
    cool = {"util_gpu": 20, "power_w": 100, "temperature_c": 50, "memory_used_bytes": 2**30}
    warm = [sample(0.1 * i, **hot) for i in range(10)]
    steady = [sample(1.0 + 0.1 * i, **cool) for i in range(10)]
    summary = summarise(warm + steady, warmup_s=1.0, duration_s=2.0)
    assert summary.sample_count == 10
    assert summary.util_gpu_max == 20 and summary.util_gpu_mean == 20
    assert summary.power_max_w == 100 and summary.temperature_max_c == 50
    assert summary.memory_used_max_bytes == 2**30
    assert summary.measured_s == 1.0 and summary.busy_time_s == pytest.approx(0.2)


def test_region_shorter_than_the_warmup_has_no_statistics_and_says_why() -> None:
    summary = summarise([sample(0.0, util_gpu=50)], warmup_s=5.0, duration_s=1.0)
    assert summary.sample_count == 0 and summary.util_gpu_mean is None
    assert summary.busy_time_s is None and summary.measured_s == 0.0
    assert any("shorter than the warm-up" in note for note in summary.notes)


def test_energy_comes_from_the_counter_when_the_device_has_one() -> None:
    samples = [sample(t, power_w=100.0, energy_j=5_000.0 + 120 * t) for t in (0, 1, 2, 3)]
    summary = summarise(samples)
    assert summary.energy_j == pytest.approx(360.0) and not summary.energy_estimated


def test_energy_is_integrated_power_labelled_as_an_estimate_without_a_counter() -> None:
    samples = [sample(t, power_w=w) for t, w in [(0, 100.0), (1, 300.0), (2, 300.0)]]
    summary = summarise(samples)
    assert summary.energy_j == pytest.approx(200.0 + 300.0)  # trapezoids
    assert summary.energy_estimated
    assert summary.power_mean_w == pytest.approx(700 / 3) and summary.power_max_w == 300.0


def test_power_is_not_integrated_across_a_gap_without_data() -> None:
    samples = [
        sample(0, power_w=100.0),
        sample(1),
        sample(5, power_w=100.0),
        sample(6, power_w=100.0),
    ]
    summary = summarise(samples)
    assert summary.energy_j == pytest.approx(100.0)  # only 5 s → 6 s
    assert summary.missing_samples == 1 and summary.sample_count == 3


def test_a_reset_energy_counter_falls_back_to_the_estimate() -> None:
    samples = [sample(0, power_w=50.0, energy_j=9_000.0), sample(2, power_w=50.0, energy_j=10.0)]
    summary = summarise(samples)
    assert summary.energy_j == pytest.approx(100.0) and summary.energy_estimated


def test_missing_metrics_stay_none() -> None:
    summary = summarise([sample(0, memory_used_bytes=2**30), sample(1, memory_used_bytes=2**31)])
    assert summary.util_gpu_mean is None and summary.util_gpu_p95 is None
    assert summary.power_mean_w is None and summary.energy_j is None
    assert summary.memory_used_max_bytes == 2**31
    assert summary.memory_total_bytes == 80 * 1024**3
    assert summary.sparkline == ""


def test_sparkline_marks_gaps() -> None:
    samples = [sample(0, util_gpu=0), sample(1), sample(2, util_gpu=100)]
    assert summarise(samples).sparkline == "▁·█"


def test_to_dict_is_json_ready_and_complete() -> None:
    # three samples 0.2 s apart over 0.4 s: the rate asked for, so no note about it
    summary = summarise([sample(t, util_gpu=40, power_w=100) for t in range(3)], duration_s=0.4)
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["device"] == 0 and data["util_gpu_mean"] == 40
    assert data["notes"] == [] and data["energy_estimated"] is True
    assert set(data) == {field.name for field in summary.__dataclass_fields__.values()}
    assert not any(isinstance(v, float) and math.isnan(v) for v in data.values())


def test_summary_is_frozen() -> None:
    summary = summarise([sample(0, util_gpu=1)])
    with pytest.raises(AttributeError):
        summary.util_gpu_mean = 2.0  # type: ignore[misc]

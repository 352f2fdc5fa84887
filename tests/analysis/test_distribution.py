from __future__ import annotations

from ncompass.analysis.distribution import Distribution


def test_statistics_use_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(20, 0, -1)]  # 1..20 shuffled order
    stats = Distribution.of(values)
    assert (stats.count, stats.mean, stats.median, stats.p95, stats.max) == (
        20,
        10.5,
        10.0,
        19.0,
        20.0,
    )


def test_empty_distribution_is_all_zero() -> None:
    assert Distribution.of([]).to_dict() == {
        "count": 0,
        "mean": 0.0,
        "median": 0.0,
        "p95": 0.0,
        "max": 0.0,
    }

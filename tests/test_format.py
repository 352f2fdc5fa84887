"""Byte counts and durations as people read them (``ncompass._format``)."""

from __future__ import annotations

import pytest

from ncompass._format import MIB, format_duration, format_size


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024 * 1024 - 1, "1.0 MiB"),  # 1023.999 KiB rounds up a unit, not to "1024.0 KiB"
        (MIB, "1.0 MiB"),
        (int(1.5 * (1 << 30)), "1.5 GiB"),
        (80 << 30, "80.0 GiB"),
        (3 << 40, "3.0 TiB"),
        (5000 << 40, "5000.0 TiB"),  # the largest unit keeps counting
    ],
)
def test_format_size(n_bytes: int, text: str) -> None:
    assert format_size(n_bytes) == text


def test_format_size_precision_is_a_parameter() -> None:
    assert format_size(16 * MIB, decimals=0) == "16 MiB"
    assert format_size(1024, decimals=0) == "1 KiB"
    assert format_size(1500, decimals=2) == "1.46 KiB"
    assert format_size(1023.7) == "1023 B"


@pytest.mark.parametrize(
    ("microseconds", "text"),
    [
        (0, "0.0 µs"),
        (4, "4.0 µs"),
        (850, "850.0 µs"),
        (999.9, "1.00 ms"),  # rounds up a unit, not to "999.9 µs" then "1000.0 µs"
        (1_000, "1.00 ms"),
        (12_345, "12.35 ms"),
        (999_999, "1.00 s"),
        (4_560_000, "4.56 s"),
        (60_000_000, "60.00 s"),  # a minute and more stay in seconds
        (3_600_000_000, "3600.00 s"),
        (-12_345, "-12.35 ms"),
    ],
)
def test_format_duration(microseconds: float, text: str) -> None:
    assert format_duration(microseconds) == text


def test_format_duration_unit_and_precision_are_parameters() -> None:
    assert format_duration(430, unit="ms") == "0.43 ms"
    assert format_duration(2_500_000, unit="ms") == "2500.00 ms"
    assert format_duration(200_000, decimals=1) == "200.0 ms"
    assert format_duration(12_400_000, decimals=1) == "12.4 s"
    assert format_duration(999.96, decimals=1) == "1.0 ms"

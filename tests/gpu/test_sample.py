"""GpuSample and the device= argument."""

from __future__ import annotations

import pytest

from ncompass.gpu import GpuSample
from ncompass.gpu._sample import normalize_devices


def test_device_argument_forms() -> None:
    assert normalize_devices(0) == (0,)
    assert normalize_devices(3) == (3,)
    assert normalize_devices([1, 0, 1]) == (1, 0)  # order kept, repeats dropped
    assert normalize_devices((2,)) == (2,)
    assert normalize_devices("all") is None


@pytest.mark.parametrize("bad", [-1, True, [], ["0"], "0", "gpu0", [0, -2], 1.0])
def test_bad_device_arguments_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="device"):
        normalize_devices(bad)  # type: ignore[arg-type]


def test_has_data_is_false_only_when_every_metric_is_missing() -> None:
    assert not GpuSample(device=0, time_ns=1, monotonic_ns=1).has_data
    assert GpuSample(device=0, time_ns=1, monotonic_ns=1, temperature_c=40.0).has_data
    assert GpuSample(device=0, time_ns=1, monotonic_ns=1, util_gpu=0.0).has_data


def test_samples_are_frozen() -> None:
    sample = GpuSample(device=0, time_ns=1, monotonic_ns=1)
    with pytest.raises(AttributeError):
        sample.util_gpu = 3.0  # type: ignore[misc]

"""The nvml backend against a library with pynvml's names, return types and errors."""

from __future__ import annotations

import pynvml
import pytest

from ncompass.gpu._backends.base import BackendUnavailable, DeviceNotFound
from ncompass.gpu._backends.nvml import NvmlBackend

from ..conftest import FakeGpu, FakeNvml


def read_once(backend: NvmlBackend) -> list:
    return list(backend.read(time_ns=1_000, monotonic_ns=2_000))


def test_reads_every_metric_in_ncompass_units() -> None:
    library = FakeNvml([FakeGpu(util=[73], energy_step_mj=1500)])
    backend = NvmlBackend(library)
    (info,) = backend.open((0,), 0.2)
    (sample,) = read_once(backend)
    assert (info.index, info.name, info.memory_total_bytes) == (
        0,
        "NVIDIA A100-SXM4-80GB",
        80 * 1024**3,
    )
    assert sample.device == 0 and sample.time_ns == 1_000 and sample.monotonic_ns == 2_000
    assert sample.util_gpu == 73.0 and sample.util_mem == 20.0
    assert sample.memory_used_bytes == 8 * 1024**3
    assert sample.memory_total_bytes == 80 * 1024**3
    assert sample.power_w == 250.0  # NVML reports milliwatts
    assert sample.temperature_c == 60.0
    assert sample.energy_j == pytest.approx(1_001.5)  # NVML reports millijoules
    backend.close()


def test_all_opens_every_device_and_a_missing_index_is_named() -> None:
    library = FakeNvml([FakeGpu(), FakeGpu(name="NVIDIA L4")])
    backend = NvmlBackend(library)
    assert [info.name for info in backend.open(None, 0.2)] == ["NVIDIA A100-SXM4-80GB", "NVIDIA L4"]
    assert [sample.device for sample in read_once(backend)] == [0, 1]
    backend.close()
    with pytest.raises(DeviceNotFound, match=r"no GPU 5: NVML sees 2 \(0, 1\)"):
        NvmlBackend(library).open((0, 5), 0.2)
    assert library.initialised == 0  # the failed open shut NVML down again


def test_missing_library_is_unavailable_with_the_reason() -> None:
    library = FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(BackendUnavailable, match=r"NVML Shared Library Not Found.*driver"):
        NvmlBackend(library).open((0,), 0.2)


def test_real_pynvml_on_this_machine_is_unavailable_not_a_crash() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:  # pragma: no cover - only on a machine with a driver
        pynvml.nvmlShutdown()
        pytest.skip("this machine has NVML")
    with pytest.raises(BackendUnavailable, match=r"nvmlInit\(\) failed"):
        NvmlBackend().open((0,), 0.2)


def test_no_devices_is_unavailable() -> None:
    with pytest.raises(BackendUnavailable, match="sees no GPU"):
        NvmlBackend(FakeNvml([])).open(None, 0.2)


def test_unsupported_metric_is_none_noted_once_and_not_asked_again() -> None:
    library = FakeNvml([FakeGpu(power_mw=None, energy_step_mj=None)])
    backend = NvmlBackend(library)
    backend.open((0,), 0.2)
    samples = [read_once(backend)[0] for _ in range(3)]
    assert all(s.power_w is None and s.energy_j is None for s in samples)
    assert all(s.util_gpu == 50.0 for s in samples)
    assert library.calls["nvmlDeviceGetPowerUsage"] == 1
    assert (0, "power not supported by this GPU") in backend.notes()
    assert (0, "energy not supported by this GPU") in backend.notes()
    backend.close()


def test_lost_gpu_gives_empty_samples_and_one_note() -> None:
    library = FakeNvml([FakeGpu(lost_after_reads=2), FakeGpu()])
    backend = NvmlBackend(library)
    backend.open(None, 0.2)
    readings = [read_once(backend) for _ in range(5)]
    lost = [reading[0] for reading in readings]
    assert [s.has_data for s in lost] == [True, True, False, False, False]
    assert all(reading[1].has_data for reading in readings)  # the other GPU is unaffected
    assert backend.notes() == [(0, "GPU stopped answering: GPU is lost")]
    # GPU 0 is lost during its second reading and never asked again; GPU 1 answers all five
    assert library.calls["nvmlDeviceGetUtilizationRates"] == 2 + 5
    backend.close()


def test_close_shuts_nvml_down_once_and_twice_is_harmless() -> None:
    library = FakeNvml([FakeGpu()])
    backend = NvmlBackend(library)
    backend.open((0,), 0.2)
    backend.close()
    backend.close()
    assert library.initialised == 0 and library.calls["nvmlShutdown"] == 1


def test_nested_backends_keep_nvml_initialised_until_the_last_closes() -> None:
    library = FakeNvml([FakeGpu()])
    outer, inner = NvmlBackend(library), NvmlBackend(library)
    outer.open((0,), 0.2)
    inner.open((0,), 0.2)
    inner.close()
    assert read_once(outer)[0].has_data
    outer.close()
    assert library.initialised == 0


def test_bytes_names_from_old_pynvml_are_decoded() -> None:
    class OldPynvml(FakeNvml):
        def nvmlDeviceGetName(self, handle: object) -> bytes:  # type: ignore[override]
            return b"Tesla V100-SXM2-16GB"

    backend = NvmlBackend(OldPynvml([FakeGpu()]))
    assert backend.open((0,), 0.2)[0].name == "Tesla V100-SXM2-16GB"
    backend.close()

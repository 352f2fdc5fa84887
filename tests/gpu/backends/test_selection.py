"""Backend selection: auto = nvml, else smi, else (not strict) cpu; strict errors list attempts."""

from __future__ import annotations

from collections.abc import Sequence

import pynvml
import pytest

from ncompass.errors import NcompassError
from ncompass.gpu import GpuBackendError
from ncompass.gpu._backends.base import BackendUnavailable, DeviceInfo, DeviceNotFound
from ncompass.gpu._backends.selection import BackendFactory, open_backend
from ncompass.gpu._sample import GpuSample


class StubBackend:
    """Opens, or fails the way a real backend does."""

    def __init__(self, name: str, failure: Exception | None = None) -> None:
        self.name = name
        self.failure = failure
        self.opened = False

    def open(self, devices: tuple[int, ...] | None, interval_s: float) -> Sequence[DeviceInfo]:
        if self.failure is not None:
            raise self.failure
        self.opened = True
        return [DeviceInfo(index, self.name) for index in devices or (0,)]

    def read(self, time_ns: int, monotonic_ns: int) -> Sequence[GpuSample]:
        return []

    def close(self) -> None:
        pass

    def notes(self) -> Sequence[tuple[int | None, str]]:
        return []


def factories(**failures: Exception) -> dict[str, BackendFactory]:
    return {
        name: (lambda name=name: StubBackend(name, failures.get(name)))
        for name in ("nvml", "smi", "cpu", "none")
    }


def has_nvml() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


NO_NVML = BackendUnavailable("nvmlInit() failed: NVML Shared Library Not Found")
NO_SMI = BackendUnavailable("nvidia-smi not found on PATH")


def test_auto_prefers_nvml() -> None:
    assert (
        open_backend("auto", (0,), 0.2, strict=True, factories=factories()).backend.name == "nvml"
    )


def test_auto_uses_smi_when_nvml_is_unavailable() -> None:
    opened = open_backend("auto", (0,), 0.2, strict=True, factories=factories(nvml=NO_NVML))
    assert opened.backend.name == "smi" and opened.fallback_reason is None


def test_strict_auto_without_tools_lists_every_attempt_and_what_to_do() -> None:
    with pytest.raises(GpuBackendError) as caught:
        open_backend("auto", (0,), 0.2, strict=True, factories=factories(nvml=NO_NVML, smi=NO_SMI))
    error = caught.value
    assert isinstance(error, NcompassError)
    assert error.attempts == (("nvml", str(NO_NVML)), ("smi", str(NO_SMI)))
    message = str(error)
    assert "nvml: nvmlInit() failed: NVML Shared Library Not Found" in message
    assert "smi: nvidia-smi not found on PATH" in message
    assert "backend='cpu'" in message and "strict=False" in message


def test_non_strict_auto_falls_back_to_cpu_with_a_warning() -> None:
    with pytest.warns(RuntimeWarning, match="nvml: .* smi: .* backend 'cpu' instead"):
        opened = open_backend(
            "auto", (0,), 0.2, strict=False, factories=factories(nvml=NO_NVML, smi=NO_SMI)
        )
    assert opened.backend.name == "cpu"
    assert opened.fallback_reason is not None and "nvidia-smi not found" in opened.fallback_reason


def test_non_strict_explicit_backend_falls_back_to_none() -> None:
    with pytest.warns(RuntimeWarning, match="backend 'none' instead"):
        opened = open_backend("smi", (0,), 0.2, strict=False, factories=factories(smi=NO_SMI))
    assert opened.backend.name == "none"


def test_strict_explicit_backend_names_only_itself() -> None:
    with pytest.raises(GpuBackendError, match="backend 'smi' cannot be started") as caught:
        open_backend("smi", (0,), 0.2, strict=True, factories=factories(smi=NO_SMI))
    assert [name for name, _ in caught.value.attempts] == ["smi"]


def test_missing_device_is_an_error_even_when_not_strict_and_smi_is_not_tried() -> None:
    stubs = factories(nvml=DeviceNotFound("no GPU 3: NVML sees 1 (0)"))
    with pytest.raises(GpuBackendError, match="nvml: no GPU 3"):
        open_backend("auto", (3,), 0.2, strict=False, factories=stubs)


def test_unknown_backend_name_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="backend must be one of auto, nvml, smi, cpu, none"):
        open_backend("rocm", (0,), 0.2, strict=True, factories=factories())


@pytest.mark.usefixtures("no_gpu_tools")
def test_without_driver_or_nvidia_smi_auto_fails_on_both_real_backends() -> None:
    if has_nvml():  # pragma: no cover - only on a machine with a driver
        pytest.skip("this machine has NVML")
    with pytest.raises(GpuBackendError) as caught:
        open_backend("auto", (0,), 0.2, strict=True)
    assert [name for name, _ in caught.value.attempts] == ["nvml", "smi"]

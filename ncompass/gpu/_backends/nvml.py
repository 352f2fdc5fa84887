"""The ``nvml`` backend: NVIDIA's management library through ``pynvml`` (nvidia-ml-py).

In-process calls, no subprocess: the cheapest and most precise backend. ``pynvml`` is imported
only when the backend opens, and can be injected (tests pass an object with pynvml's names).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from ncompass.gpu._backends.base import BackendUnavailable, DeviceInfo, DeviceNotFound, Notes
from ncompass.gpu._sample import GpuSample

_T = TypeVar("_T")

# pynvml's values for these constants; used when an injected library does not define them.
_NVML_TEMPERATURE_GPU = 0
_NVML_ERROR_NOT_SUPPORTED = 3
_NVML_ERROR_LIBRARY_NOT_FOUND = 12
_NVML_ERROR_GPU_IS_LOST = 15


class NvmlLibrary(Protocol):
    """The part of ``pynvml`` this backend calls (names and return types as in nvidia-ml-py)."""

    NVMLError: type[Exception]

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int: ...
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int: ...


class NvmlBackend:
    """Reads utilisation, memory, power, temperature and the energy counter through NVML.

    Args:
        library: A ``pynvml``-compatible object; ``None`` imports ``pynvml`` on ``open``.
    """

    name = "nvml"

    def __init__(self, library: NvmlLibrary | None = None) -> None:
        self._injected = library
        self._nvml: NvmlLibrary | None = None
        self._handles: list[tuple[int, Any]] = []
        # (device, metric) pairs the device answered "not supported" for: never asked again
        self._unsupported: set[tuple[int, str]] = set()
        self._lost: set[int] = set()
        self._notes = Notes()

    def open(self, devices: tuple[int, ...] | None, interval_s: float) -> Sequence[DeviceInfo]:
        """Initialises NVML and opens the devices."""
        nvml = self._injected if self._injected is not None else _import_pynvml()
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as error:
            raise BackendUnavailable(_init_failure(error)) from error
        self._nvml = nvml
        try:
            return self._open_devices(nvml, devices)
        except BaseException:
            self.close()
            raise

    def _open_devices(
        self, nvml: NvmlLibrary, devices: tuple[int, ...] | None
    ) -> Sequence[DeviceInfo]:
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as error:
            raise BackendUnavailable(f"nvmlDeviceGetCount() failed: {error}") from error
        if count == 0:
            raise BackendUnavailable("NVML sees no GPU")
        indices = devices if devices is not None else tuple(range(count))
        missing = [index for index in indices if index >= count]
        if missing:
            raise DeviceNotFound(
                f"no GPU {', '.join(map(str, missing))}: NVML sees {count} "
                f"({', '.join(map(str, range(count)))})"
            )
        opened = []
        for index in indices:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                name = _text(nvml.nvmlDeviceGetName(handle))
                total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
            except nvml.NVMLError as error:
                raise BackendUnavailable(f"cannot open GPU {index}: {error}") from error
            self._handles.append((index, handle))
            opened.append(DeviceInfo(index, name, total))
        return opened

    def read(self, time_ns: int, monotonic_ns: int) -> Sequence[GpuSample]:
        """One sample per device; a metric that fails is ``None`` and leaves a note."""
        return [
            self._read_device(index, handle, time_ns, monotonic_ns)
            for index, handle in self._handles
        ]

    def _read_device(self, index: int, handle: Any, time_ns: int, monotonic_ns: int) -> GpuSample:
        nvml = self._nvml
        assert nvml is not None, "read() before open()"
        sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", _NVML_TEMPERATURE_GPU)
        utilization = self._query(index, "utilisation", nvml.nvmlDeviceGetUtilizationRates, handle)
        memory = self._query(index, "memory", nvml.nvmlDeviceGetMemoryInfo, handle)
        power_mw = self._query(index, "power", nvml.nvmlDeviceGetPowerUsage, handle)
        temperature = self._query(
            index, "temperature", lambda h: nvml.nvmlDeviceGetTemperature(h, sensor), handle
        )
        energy_mj = self._query(index, "energy", nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
        return GpuSample(
            device=index,
            time_ns=time_ns,
            monotonic_ns=monotonic_ns,
            util_gpu=float(utilization.gpu) if utilization is not None else None,
            util_mem=float(utilization.memory) if utilization is not None else None,
            memory_used_bytes=int(memory.used) if memory is not None else None,
            memory_total_bytes=int(memory.total) if memory is not None else None,
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            temperature_c=float(temperature) if temperature is not None else None,
            energy_j=energy_mj / 1000.0 if energy_mj is not None else None,
        )

    def _query(self, index: int, metric: str, call: Callable[[Any], _T], handle: Any) -> _T | None:
        if (index, metric) in self._unsupported or index in self._lost:
            return None
        nvml = self._nvml
        assert nvml is not None
        try:
            return call(handle)
        except nvml.NVMLError as error:
            code = getattr(error, "value", None)
            if code == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", _NVML_ERROR_NOT_SUPPORTED):
                self._unsupported.add((index, metric))
                self._notes.add(index, f"{metric} not supported by this GPU")
            elif code == getattr(nvml, "NVML_ERROR_GPU_IS_LOST", _NVML_ERROR_GPU_IS_LOST):
                # a lost GPU needs a reset; asking again only costs time
                self._lost.add(index)
                self._notes.add(index, f"GPU stopped answering: {error}")
            else:
                self._notes.add(index, f"reading {metric} failed: {error}")
            return None

    def close(self) -> None:
        """Shuts NVML down (NVML counts init/shutdown pairs, so nested monitors are safe)."""
        nvml, self._nvml = self._nvml, None
        self._handles = []
        if nvml is None:
            return
        # a lost GPU can make shutdown fail; there is nothing left to release then
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()

    def notes(self) -> Sequence[tuple[int | None, str]]:
        """Unsupported metrics and failed reads, per device."""
        return self._notes.items()


def _import_pynvml() -> NvmlLibrary:
    try:
        import pynvml
    except ImportError as error:
        raise BackendUnavailable(
            "the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
        ) from error
    library: NvmlLibrary = pynvml
    return library


def _init_failure(error: Exception) -> str:
    if getattr(error, "value", None) == _NVML_ERROR_LIBRARY_NOT_FOUND:
        return f"nvmlInit() failed: {error} (libnvidia-ml.so.1; is an NVIDIA driver installed?)"
    return f"nvmlInit() failed: {error}"


def _text(name: str | bytes) -> str:
    # nvidia-ml-py returns str; pynvml releases before 11.5 returned bytes
    return name.decode(errors="replace") if isinstance(name, bytes) else name

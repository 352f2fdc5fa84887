"""One reading of one device, and the ``device=`` argument every entry point accepts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

HOST_DEVICE: Final = -1
"""The device index of the host CPU pseudo-device the ``cpu`` backend reports."""

DeviceSpec: TypeAlias = int | Sequence[int] | Literal["all"]
"""A GPU index, a list of indices, or ``"all"`` (every device the backend sees)."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one device at one moment.

    Every sample carries two clocks of the same instant: ``time_ns`` is the wall clock
    (``time.time_ns()``, the clock PyTorch profiler traces use), ``monotonic_ns`` is
    ``time.perf_counter_ns()`` (the clock the sampler schedules on; immune to clock steps).
    A metric is ``None`` when the device does not report it or did not answer at that moment.

    Attributes:
        device: NVML / nvidia-smi index of the device, or ``HOST_DEVICE`` (-1) for the host CPU.
        time_ns: Wall-clock time of the reading.
        monotonic_ns: ``time.perf_counter_ns()`` at the reading.
        util_gpu: Percent of the driver's last sampling period in which a kernel was running
            (for the ``cpu`` backend: percent of the available cores the process tree used).
        util_mem: Percent of that period in which device memory was read or written.
        memory_used_bytes: Device memory in use (``cpu``: resident memory of the process tree).
        memory_total_bytes: Device memory size (``cpu``: host memory size).
        power_w: Power draw in watts.
        temperature_c: GPU core temperature in degrees Celsius.
        energy_j: The device's cumulative energy counter in joules (NVML, Volta and newer).
    """

    device: int
    time_ns: int
    monotonic_ns: int
    util_gpu: float | None = None
    util_mem: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    energy_j: float | None = None

    @property
    def has_data(self) -> bool:
        """Whether the device answered at all (at least one metric is present)."""
        return any(
            value is not None
            for value in (
                self.util_gpu,
                self.util_mem,
                self.memory_used_bytes,
                self.power_w,
                self.temperature_c,
                self.energy_j,
            )
        )


def normalize_devices(device: DeviceSpec) -> tuple[int, ...] | None:
    """Turns a ``device=`` argument into a tuple of distinct indices, or ``None`` for all.

    Raises:
        ValueError: The argument is not an index, a non-empty list of indices or ``"all"``.
    """
    if isinstance(device, str):
        if device == "all":
            return None
        raise ValueError(f'device must be an int, a list of ints or "all", not {device!r}')
    if not isinstance(device, Sequence):
        return (_checked_index(device),)
    indices = tuple(dict.fromkeys(_checked_index(index) for index in device))
    if not indices:
        raise ValueError('device list is empty; pass at least one index or "all"')
    return indices


def _checked_index(index: object) -> int:
    # bool is an int subclass; device=True is a mistake, not device 1
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"a device index is an int >= 0, not {index!r}")
    return index

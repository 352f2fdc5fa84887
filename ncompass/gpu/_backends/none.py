"""The ``none`` backend: no sampling at all, for dry runs and machines with nothing to watch."""

from __future__ import annotations

from collections.abc import Sequence

from ncompass.gpu._backends.base import DeviceInfo
from ncompass.gpu._sample import GpuSample


class NoneBackend:
    """Opens the requested devices by index and never reads anything."""

    name = "none"

    def open(self, devices: tuple[int, ...] | None, interval_s: float) -> Sequence[DeviceInfo]:
        """Returns the requested indices (device 0 for ``"all"``, which cannot be counted)."""
        return [DeviceInfo(index, "not sampled") for index in (devices or (0,))]

    def read(self, time_ns: int, monotonic_ns: int) -> Sequence[GpuSample]:
        """Never called: the monitor starts no sampler for this backend."""
        return []

    def close(self) -> None:
        """Nothing to release."""

    def notes(self) -> Sequence[tuple[int | None, str]]:
        """No notes: the summary's backend name already says nothing was sampled."""
        return []

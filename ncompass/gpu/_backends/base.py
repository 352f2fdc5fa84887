"""What every monitoring backend provides: open the devices, read them, close."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ncompass.gpu._sample import GpuSample


@dataclass(frozen=True)
class DeviceInfo:
    """A device a backend opened: its index, its name and (when known) its memory size."""

    index: int
    name: str
    memory_total_bytes: int | None = None


class BackendUnavailable(Exception):
    """This backend cannot run on this machine; the message says why, for the user."""


class DeviceNotFound(Exception):
    """The backend runs, but a requested device index does not exist."""


class MonitorBackend(Protocol):
    """A source of device readings.

    The monitor calls ``open`` once, then ``read`` from its sampler thread on a fixed schedule
    (never from two threads at once), then ``close`` once, also after errors.
    """

    name: str

    def open(self, devices: tuple[int, ...] | None, interval_s: float) -> Sequence[DeviceInfo]:
        """Starts reading ``devices`` (``None``: every device) and returns what was opened.

        Raises:
            BackendUnavailable: The tooling is missing or does not work here.
            DeviceNotFound: A requested index does not exist.
        """
        ...

    def read(self, time_ns: int, monotonic_ns: int) -> Sequence[GpuSample]:
        """Returns one sample per opened device, stamped with the given times."""
        ...

    def close(self) -> None:
        """Releases everything ``open`` acquired. Safe to call twice."""
        ...

    def notes(self) -> Sequence[tuple[int | None, str]]:
        """Things the user should know, as ``(device or None for all, text)``."""
        ...


class Notes:
    """Notes collected while monitoring, each kept once with a count of repeats."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int | None, str], int] = {}

    def add(self, device: int | None, text: str) -> None:
        """Records ``text`` about ``device`` (``None``: about every device)."""
        key = (device, text)
        self._counts[key] = self._counts.get(key, 0) + 1

    def items(self) -> list[tuple[int | None, str]]:
        """The notes in the order first seen, repeats shown as ``(×N)``."""
        return [
            (device, text if count == 1 else f"{text} (×{count})")
            for (device, text), count in self._counts.items()
        ]

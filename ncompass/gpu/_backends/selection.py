"""Choosing a backend: ``auto`` tries NVML, then nvidia-smi, then (not strict) the host CPU."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ncompass.gpu._backends.base import (
    BackendUnavailable,
    DeviceInfo,
    DeviceNotFound,
    MonitorBackend,
)
from ncompass.gpu._backends.cpu import CpuBackend
from ncompass.gpu._backends.none import NoneBackend
from ncompass.gpu._backends.nvml import NvmlBackend
from ncompass.gpu._backends.smi import SmiBackend
from ncompass.gpu._errors import GpuBackendError
from ncompass.warning_location import stacklevel_outside

BACKEND_NAMES = ("auto", "nvml", "smi", "cpu", "none")
"""Every value ``backend=`` accepts."""

BackendFactory = Callable[[], MonitorBackend]

ADVICE = (
    "Use backend='cpu' to watch the host CPU instead, backend='none' to disable sampling, "
    "or strict=False to fall back automatically."
)
"""The last line of a strict failure's message (a command line words it its own way)."""

# A dict, not a constant: tests swap a backend for one with an injected library.
DEFAULT_FACTORIES: dict[str, BackendFactory] = {
    "nvml": NvmlBackend,
    "smi": SmiBackend,
    "cpu": CpuBackend,
    "none": NoneBackend,
}


@dataclass(frozen=True)
class OpenedBackend:
    """A backend that opened, its devices, and why it is not the one asked for (if so)."""

    backend: MonitorBackend
    devices: Sequence[DeviceInfo]
    fallback_reason: str | None = None


def open_backend(
    requested: str,
    devices: tuple[int, ...] | None,
    interval_s: float,
    *,
    strict: bool,
    factories: Mapping[str, BackendFactory] = DEFAULT_FACTORIES,
) -> OpenedBackend:
    """Opens the requested backend, or a fallback when ``strict`` is false.

    ``auto`` tries ``nvml`` then ``smi``; when neither works it falls back to ``cpu`` with a
    warning. An explicit backend that does not work falls back to ``none``. A device index that
    does not exist is always an error: every backend would give the same answer.

    Raises:
        GpuBackendError: Nothing requested works and ``strict`` is true, or a device is missing.
        ValueError: ``requested`` is not one of ``BACKEND_NAMES``.
    """
    if requested not in BACKEND_NAMES:
        raise ValueError(f"backend must be one of {', '.join(BACKEND_NAMES)}, not {requested!r}")
    candidates = ("nvml", "smi") if requested == "auto" else (requested,)
    attempts: list[tuple[str, str]] = []
    for name in candidates:
        backend = factories[name]()
        try:
            return OpenedBackend(backend, backend.open(devices, interval_s))
        except BackendUnavailable as error:
            attempts.append((name, str(error)))
        except DeviceNotFound as error:
            attempts.append((name, str(error)))
            raise GpuBackendError(f"{name}: {error}", attempts) from error
    if strict:
        raise GpuBackendError(_failure_message(requested, attempts), attempts)
    fallback = "cpu" if requested == "auto" else "none"
    reason = f"{_tried(attempts)}; monitoring with backend {fallback!r} instead"
    warnings.warn(
        f"GPU monitor: {reason}", RuntimeWarning, stacklevel=stacklevel_outside("ncompass.gpu")
    )
    try:
        backend = factories[fallback]()
        return OpenedBackend(backend, backend.open(devices, interval_s), reason)
    except BackendUnavailable as error:
        backend = factories["none"]()
        reason = f"{reason}, which failed too ({error}); sampling disabled"
        return OpenedBackend(backend, backend.open(devices, interval_s), reason)


def _tried(attempts: Sequence[tuple[str, str]]) -> str:
    return "; ".join(f"{name}: {reason}" for name, reason in attempts)


def _failure_message(requested: str, attempts: Sequence[tuple[str, str]]) -> str:
    lines = [
        "no GPU monitoring backend works here (backend='auto')"
        if requested == "auto"
        else f"backend {requested!r} cannot be started"
    ]
    lines += [f"  {name}: {reason}" for name, reason in attempts]
    lines.append(ADVICE)
    return "\n".join(lines)

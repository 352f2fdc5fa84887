"""The limit: per-dtype peak FLOP/s and memory bandwidth of the device a trace ran on.

GPUs come from a table of vendor datasheet figures (dense tensor-core rates, no sparsity),
chosen by the name in the trace's ``deviceProperties``; a CPU's figures are measured on this
machine (:mod:`ncompass.analysis.calibration`); the user may override either
(``--peak-flops``/``--peak-bandwidth``, or ``NCOMPASS_PEAK_FLOPS``/``NCOMPASS_PEAK_BANDWIDTH``).
Every :class:`DevicePeaks` says where its figures came from (``source``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ncompass.environment_variables import NCOMPASS_PEAK_BANDWIDTH, NCOMPASS_PEAK_FLOPS
from ncompass.errors import NcompassError

Source = Literal["table", "measured", "user"]

T = 1e12


@dataclass(frozen=True)
class DevicePeaks:
    """Peak FLOP/s per dtype class (``fp32``, ``bf16``, ...) and bytes/s of one device."""

    name: str
    kind: Literal["cpu", "cuda"]
    flops_per_s: dict[str, float]
    bytes_per_s: float
    source: Source
    note: str = ""  # how the figures were had (the table row, the calibration, the override)
    raised_to_observed: bool = False  # the trace itself beat a measured peak (see roofline)
    extra: dict[str, Any] = field(default_factory=dict)

    def peak_flops(self, dtype: str) -> float:
        """The peak for ``dtype``; a dtype the device has no figure for gets its fp32 one."""
        return self.flops_per_s.get(dtype) or self.flops_per_s.get("fp32") or 0.0

    def to_dict(self) -> dict[str, Any]:
        """The summary's ``device`` object."""
        row: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "peak_flops_per_s": dict(self.flops_per_s),
            "peak_bytes_per_s": self.bytes_per_s,
            "source": self.source,
            "note": self.note,
        }
        if self.raised_to_observed:
            row["raised_to_observed"] = True
        row.update(self.extra)
        return row


def _gpu(fp32: float, tf32: float, half: float, fp8: float, int8: float, tbps: float) -> Any:
    flops = {"fp32": fp32 * T, "tf32": tf32 * T, "bf16": half * T, "fp16": half * T}
    if fp8:
        flops["fp8"] = fp8 * T
    if int8:
        flops["int8"] = int8 * T
    return flops, tbps * T


# (substrings that all must be in the device name, lower case), label, figures. Most specific
# first: "h100 pcie" before "h100". Vendor datasheets, dense (no structured sparsity).
GPU_TABLE: list[tuple[tuple[str, ...], str, Any]] = [
    (("a100", "80gb"), "A100 80GB", _gpu(19.5, 156, 312, 0, 624, 2.039)),
    (("a100",), "A100 40GB", _gpu(19.5, 156, 312, 0, 624, 1.555)),
    (("h100", "pcie"), "H100 PCIe", _gpu(51.2, 378, 756, 1513, 1513, 2.0)),
    (("h100",), "H100 SXM", _gpu(66.9, 494.7, 989.4, 1978.9, 1978.9, 3.35)),
    (("h200",), "H200", _gpu(66.9, 494.7, 989.4, 1978.9, 1978.9, 4.8)),
    (("b200",), "B200", _gpu(80, 1100, 2250, 4500, 4500, 8.0)),
    (("l40s",), "L40S", _gpu(91.6, 183, 362, 733, 733, 0.864)),
    (("l4",), "L4", _gpu(30.3, 60, 121, 242.5, 242.5, 0.3)),
    (("rtx 4090",), "RTX 4090", _gpu(82.6, 82.6, 165.2, 330.3, 330.3, 1.008)),
    (("mi300x",), "MI300X", _gpu(163.4, 653.7, 1307.4, 2614.9, 2614.9, 5.3)),
    (("mi250x",), "MI250X", _gpu(95.7, 95.7, 383, 0, 383, 3.2)),
    (("mi250",), "MI250", _gpu(90.5, 90.5, 362, 0, 362, 3.2)),
    (("v100",), "V100", _gpu(15.7, 15.7, 125, 0, 0, 0.9)),
]


def table_peaks(device_name: str) -> DevicePeaks | None:
    """The table's row for a GPU name (``NVIDIA A100-SXM4-80GB``), or None when not listed."""
    lowered = device_name.lower()
    for needles, label, (flops, bandwidth) in GPU_TABLE:
        if all(needle in lowered for needle in needles):
            return DevicePeaks(
                device_name, "cuda", dict(flops), bandwidth, "table", f"datasheet: {label}"
            )
    return None


def gpu_name(metadata: dict[str, Any]) -> str | None:
    """The first device's name in a trace's ``deviceProperties``, if it has any."""
    devices = metadata.get("deviceProperties")
    if isinstance(devices, list) and devices and isinstance(devices[0], dict):
        name = devices[0].get("name")
        return str(name) if name else None
    return None


class PeakValueError(NcompassError):
    """A peak given by the user is not a positive number."""


def _positive(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise PeakValueError(
            f"{what} must be a positive number of per-second units (such as 312e12), not {text!r}"
        )
    return value


def user_overrides(
    peak_flops: float | None = None, peak_bandwidth: float | None = None
) -> tuple[float | None, float | None]:
    """The user's peaks: the arguments, else ``NCOMPASS_PEAK_FLOPS``/``NCOMPASS_PEAK_BANDWIDTH``.

    Raises:
        PeakValueError: A value is not a positive number (it names the variable).
    """
    if peak_flops is None and os.environ.get(NCOMPASS_PEAK_FLOPS):
        peak_flops = _positive(os.environ[NCOMPASS_PEAK_FLOPS], NCOMPASS_PEAK_FLOPS)
    if peak_bandwidth is None and os.environ.get(NCOMPASS_PEAK_BANDWIDTH):
        peak_bandwidth = _positive(os.environ[NCOMPASS_PEAK_BANDWIDTH], NCOMPASS_PEAK_BANDWIDTH)
    for value, what in ((peak_flops, "--peak-flops"), (peak_bandwidth, "--peak-bandwidth")):
        if value is not None:
            _positive(str(value), what)
    return peak_flops, peak_bandwidth


def with_overrides(
    peaks: DevicePeaks | None,
    name: str,
    kind: Literal["cpu", "cuda"],
    peak_flops: float | None,
    peak_bandwidth: float | None,
) -> DevicePeaks | None:
    """``peaks`` with the user's figures in place of its own (one FLOP/s for every dtype)."""
    if peak_flops is None and peak_bandwidth is None:
        return peaks
    if peaks is None:
        if peak_flops is None or peak_bandwidth is None:
            return None  # half a roofline: the caller says which figure is missing
        return DevicePeaks(name, kind, {"fp32": peak_flops}, peak_bandwidth, "user", "given")
    flops = {dtype: peak_flops for dtype in peaks.flops_per_s} if peak_flops else peaks.flops_per_s
    if peak_flops:
        flops.setdefault("fp32", peak_flops)
    return replace(
        peaks,
        flops_per_s=dict(flops),
        bytes_per_s=peak_bandwidth or peaks.bytes_per_s,
        source="user",
        note=f"given (was {peaks.source}: {peaks.note})",
    )


__all__ = [
    "GPU_TABLE",
    "DevicePeaks",
    "PeakValueError",
    "gpu_name",
    "table_peaks",
    "user_overrides",
    "with_overrides",
]

"""Per-name totals of GPU events and CPU operators, and the ``operations`` list of a summary."""

from __future__ import annotations

from dataclasses import dataclass

from ncompass.analysis.markers import MarkerStats
from ncompass.analysis.setup_time import SetupTime
from ncompass.analysis.summary_types import Operation
from ncompass.traces.link import KERNEL_CLASSES, LinkedTrace


@dataclass(slots=True)  # one per distinct name: a trace may have hundreds of thousands
class KernelStats:
    """Calls and GPU time of one GPU event name (kernel, memcpy or memset)."""

    name: str
    kernel_class: str
    calls: int = 0
    total_us: float = 0.0
    max_us: float = 0.0
    bytes: int = 0

    @property
    def mean_us(self) -> float:
        """Mean duration of one call."""
        return self.total_us / self.calls if self.calls else 0.0


def kernel_stats(trace: LinkedTrace) -> dict[str, KernelStats]:
    """Totals per GPU event name, the most expensive first.

    Args:
        trace: The linked trace.

    Returns:
        Name -> totals.
    """
    gpu = trace.gpu
    by_name: list[KernelStats | None] = [None] * len(trace.names)  # by name index
    for index in range(len(gpu)):
        name_id = gpu.name[index]
        entry = by_name[name_id]
        if entry is None:
            kernel_class = KERNEL_CLASSES[gpu.kernel_class[index]].value
            entry = by_name[name_id] = KernelStats(trace.names[name_id], kernel_class)
        duration = gpu.duration[index]
        entry.calls += 1
        entry.total_us += duration
        entry.bytes += gpu.bytes[index]
        if duration > entry.max_us:
            entry.max_us = duration
    ordered = sorted(
        (entry for entry in by_name if entry is not None), key=lambda entry: -entry.total_us
    )
    return {entry.name: entry for entry in ordered}


def build_operations(
    trace: LinkedTrace,
    markers: dict[str, MarkerStats],
    kernels: dict[str, KernelStats],
    top: int,
    setup: SetupTime | None = None,
) -> list[Operation]:
    """The summary's ``operations``: the top markers, GPU events and CPU operators.

    With ``setup``, CPU operators count only their calls outside torch.compile's compilation
    (the phases themselves drop out); ``max_us`` is still over every call.

    Shares: markers and CPU operators relative to the trace's CPU wall time (nested ranges
    overlap, so CPU shares may add up to more than 1); GPU time relative to the summed duration
    of all GPU events.

    Args:
        trace: The linked trace.
        markers: Marker statistics (see :func:`~ncompass.analysis.markers.marker_stats`).
        kernels: GPU event totals (see :func:`kernel_stats`).
        top: How many of each kind to keep.

    Returns:
        One dict per operation, each with ``kind``, ``name`` and its times.
    """
    wall = trace.cpu_end - trace.cpu_start if trace.cpu_end > trace.cpu_start else 0.0
    gpu_busy = sum(entry.total_us for entry in kernels.values())
    operations: list[Operation] = []
    for stats in list(markers.values())[:top]:
        operations.append(
            {
                "kind": "marker",
                **stats.to_dict(),
                "share_of_cpu_time": _share(stats.cpu_total_us, wall),
                "share_of_gpu_time": _share(stats.gpu_total_us, gpu_busy),
            }
        )
    for entry in list(kernels.values())[:top]:
        operations.append(
            {
                "kind": "kernel",
                "name": entry.name,
                "class": entry.kernel_class,
                "calls": entry.calls,
                "total_us": entry.total_us,
                "mean_us": entry.mean_us,
                "max_us": entry.max_us,
                "bytes": entry.bytes,
                "share_of_gpu_time": _share(entry.total_us, gpu_busy),
            }
        )
    steady = {
        name: setup.operator_steady(name, totals.total_us, totals.calls)
        if setup is not None
        else (totals.total_us, totals.calls)
        for name, totals in trace.cpu_operators.items()
    }
    ranked = sorted((name for name in steady if steady[name][1] > 0), key=lambda n: -steady[n][0])
    for name in ranked[:top]:
        total, calls = steady[name]
        operations.append(
            {
                "kind": "cpu_op",
                "name": name,
                "calls": calls,
                "total_us": total,
                "mean_us": total / calls,
                "max_us": trace.cpu_operators[name].max_us,
                "share_of_cpu_time": _share(total, wall),
            }
        )
    return operations


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0

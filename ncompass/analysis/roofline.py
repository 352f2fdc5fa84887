"""How far from the limit: FLOPs, bytes, achieved rates, the bound and the share of the
roofline reached, per marker, CPU operator and GPU kernel, and the run's MFU.

For a piece of work of ``F`` FLOPs and ``B`` bytes that took ``t`` (GPU kernel time on a GPU,
op time on a CPU), the roofline's time is ``max(F / peak_flops, B / peak_bandwidth)`` (FLOPs
over the peak of each op's own dtype); the share of the roofline reached (``of_peak``) is that
time over ``t``. The bound is ``compute`` or ``memory`` by which roof is higher, and
``overhead`` when neither roof explains even :data:`OVERHEAD_BELOW` of the time (launch- or
Python-bound). Marker figures are inclusive of nested markers and count each op once (the
outermost op that does work: ``aten::linear``, not also its ``aten::addmm``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ncompass.analysis.device_peaks import (
    DevicePeaks,
    gpu_name,
    table_peaks,
    user_overrides,
    with_overrides,
)
from ncompass.analysis.work_events import RangeSums, WorkEvents, read_work_events

OVERHEAD_BELOW = 0.05
"""Below this share of the roofline, the time is called overhead, not compute or memory."""

_STEP_PREFIX = "ProfilerStep#"


@dataclass
class Work:
    """FLOPs (per dtype), tensor FLOPs, bytes and time of one marker, op or kernel name."""

    flops: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tensor_flops: float = 0.0
    bytes: float = 0.0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # the CPU time it spanned (for the GPU idle share)
    estimated: bool = False

    def add(self, dtype: str, flops: float, tensor_flops: float, size: float) -> None:
        """Add one op's work."""
        self.flops[dtype] += flops
        self.tensor_flops += tensor_flops
        self.bytes += size

    @property
    def total_flops(self) -> float:
        """FLOPs of every dtype."""
        return sum(self.flops.values())


@dataclass
class EfficiencyReport:
    """The efficiency figures of one trace (``None`` peaks: no table row and no override)."""

    device: DevicePeaks | None
    has_gpu: bool
    markers: dict[str, Work]
    operators: dict[str, Work]
    kernels: dict[str, Work]
    model_flops: float
    steps: int
    run_seconds: float
    dominant_dtype: str

    def efficiency(self, work: Work) -> dict[str, Any]:
        """The ``efficiency`` object of one row."""
        flops = work.total_flops
        seconds = work.seconds
        row: dict[str, Any] = {
            "flops": flops,
            "tensor_flops": work.tensor_flops,
            "bytes": work.bytes,
            "flops_per_s": flops / seconds if seconds > 0 else None,
            "bytes_per_s": work.bytes / seconds if seconds > 0 else None,
            "intensity": flops / work.bytes if work.bytes > 0 else None,
            "bound": None,
            "of_peak": None,
            "time_left_us": None,
        }
        if work.estimated:
            row["estimated"] = True
        if self.has_gpu and work.cpu_seconds > 0:
            row["gpu_idle_share"] = max(0.0, 1.0 - seconds / work.cpu_seconds)
        share = self._of_peak(work)
        if share is not None:
            compute, memory = self._roof_seconds(work)
            row["of_peak"] = share
            row["bound"] = (
                "overhead"
                if share < OVERHEAD_BELOW
                else "compute"
                if compute >= memory
                else "memory"
            )
            row["time_left_us"] = seconds * (1.0 - share) * 1e6
        return row

    def _roof_seconds(self, work: Work) -> tuple[float, float]:
        device = self.device
        assert device is not None
        compute = sum(
            flops / device.peak_flops(dtype) for dtype, flops in work.flops.items() if flops
        )
        return compute, work.bytes / device.bytes_per_s

    def _of_peak(self, work: Work) -> float | None:
        if self.device is None or work.seconds <= 0:
            return None
        if not work.total_flops and not work.bytes:
            return None
        return min(1.0, max(self._roof_seconds(work)) / work.seconds)

    def mfu(self) -> dict[str, Any] | None:
        """Model FLOPs per step and their share of the dominant dtype's peak over the run."""
        if not self.model_flops:
            return None
        row: dict[str, Any] = {
            "model_flops": self.model_flops,
            "steps": self.steps,
            "flops_per_step": self.model_flops / max(1, self.steps),
            "dtype": self.dominant_dtype,
            "seconds": self.run_seconds,
            "mfu": None,
        }
        if self.device is not None and self.run_seconds > 0:
            peak = self.device.peak_flops(self.dominant_dtype)
            row["mfu"] = self.model_flops / self.run_seconds / peak if peak else None
        return row


def efficiency_report(
    path: str | Path,
    *,
    peak_flops: float | None = None,
    peak_bandwidth: float | None = None,
    calibrate: bool | None = None,
    events: WorkEvents | None = None,
) -> EfficiencyReport | None:
    """The efficiency figures of a trace, or None when it was recorded without shapes.

    Args:
        path: The trace file.
        peak_flops: The device's peak FLOP/s (every dtype), in place of the table's or the
            calibration's (else ``NCOMPASS_PEAK_FLOPS``).
        peak_bandwidth: The device's memory bandwidth in bytes/s (else
            ``NCOMPASS_PEAK_BANDWIDTH``).
        calibrate: Measure this machine's peaks (None: for CPU traces only; True: also
            re-measure a cached calibration).
        events: The trace's work events, when already read.

    Raises:
        PeakValueError: A user-given peak is not a positive number.
    """
    peak_flops, peak_bandwidth = user_overrides(peak_flops, peak_bandwidth)
    found = events if events is not None else read_work_events(path)
    if not found.shaped_ops:
        return None
    has_gpu = bool(found.gpu)
    device = _device(found, has_gpu, peak_flops, peak_bandwidth, calibrate)
    report = _aggregate(found, has_gpu, device)
    if device is not None and device.source == "measured":
        report.device = _raised_to_observed(report, device)
    return report


def work_figures(path: str | Path) -> EfficiencyReport | None:
    """The work figures (FLOPs, bytes, achieved rates) of a trace without any peaks, so no
    calibration; None when it was recorded without shapes."""
    found = read_work_events(path)
    if not found.shaped_ops:
        return None
    return _aggregate(found, bool(found.gpu), None)


def _device(
    found: WorkEvents,
    has_gpu: bool,
    peak_flops: float | None,
    peak_bandwidth: float | None,
    calibrate: bool | None,
) -> DevicePeaks | None:
    name = gpu_name(found.metadata) if has_gpu else None
    peaks: DevicePeaks | None = None
    if has_gpu:
        peaks = table_peaks(name) if name else None
        if calibrate:  # on request: the host's figures stand in for an unlisted GPU's
            peaks = peaks or _measured()
    elif peak_flops is None or peak_bandwidth is None or calibrate:
        peaks = _measured(recalibrate=bool(calibrate))
    kind: Literal["cpu", "cuda"] = "cuda" if has_gpu else "cpu"
    return with_overrides(peaks, name or kind, kind, peak_flops, peak_bandwidth)


def _measured(*, recalibrate: bool = False) -> DevicePeaks | None:
    try:
        from ncompass.analysis.calibration import cpu_peaks
    except ImportError:  # pragma: no cover - calibration's own imports are stdlib
        return None
    try:
        return cpu_peaks(recalibrate=recalibrate)
    except ImportError:  # no torch here to measure with: figures without a roofline
        return None


def _aggregate(found: WorkEvents, has_gpu: bool, device: DevicePeaks | None) -> EfficiencyReport:
    gpu_by_correlation: dict[int, float] = defaultdict(float)
    calls = found.gpu
    for correlation, duration in zip(calls.correlation, calls.duration, strict=True):
        if correlation != -1:
            gpu_by_correlation[correlation] += duration
    markers: dict[str, Work] = defaultdict(Work)
    operators: dict[str, Work] = defaultdict(Work)
    model_flops = 0.0
    dtype_flops: dict[str, float] = defaultdict(float)
    steps = 0
    step_seconds = 0.0
    first, last = float("inf"), float("-inf")
    # the op that launched each correlation, and its GPU time: kernels inherit its work
    launcher: dict[int, tuple[Any, float]] = {}
    for thread in found.threads.values():
        ops = thread.ops
        launch_times = [ts for ts, _ in thread.launches]
        launch_gpu = RangeSums(
            launch_times, (gpu_by_correlation.get(c, 0.0) for _, c in thread.launches)
        )
        counted = [call for call in ops if call.counted]
        starts = [call.start for call in counted]
        sums = {
            "tensor": RangeSums(starts, (c.work.tensor_flops for c in counted)),
            "bytes": RangeSums(starts, (c.work.bytes for c in counted)),
        }
        by_dtype: dict[str, RangeSums] = {}
        for dtype in {c.work.dtype for c in counted}:
            by_dtype[dtype] = RangeSums(
                starts, (c.work.flops if c.work.dtype == dtype else 0.0 for c in counted)
            )
        for call in ops:
            entry = operators[call.name]
            entry.add(call.work.dtype, call.work.flops, call.work.tensor_flops, call.work.bytes)
            cpu = (call.end - call.start) * 1e-6
            gpu = launch_gpu.between(call.start, call.end) * 1e-6 if has_gpu else 0.0
            entry.seconds += gpu if has_gpu else cpu
            entry.cpu_seconds += cpu
            if call.counted:
                model_flops += call.work.tensor_flops
                dtype_flops[call.work.dtype] += call.work.tensor_flops
            first, last = min(first, call.start), max(last, call.end)
        if has_gpu and ops:
            _innermost_launchers(ops, thread.launches, launch_gpu, launcher)
        for name, start, end in thread.markers:
            entry = markers[name]
            for dtype, column in by_dtype.items():
                entry.flops[dtype] += column.between(start, end)
            entry.tensor_flops += sums["tensor"].between(start, end)
            entry.bytes += sums["bytes"].between(start, end)
            cpu = (end - start) * 1e-6
            entry.seconds += launch_gpu.between(start, end) * 1e-6 if has_gpu else cpu
            entry.cpu_seconds += cpu
            if name.startswith(_STEP_PREFIX):
                steps += 1
                step_seconds += cpu
            first, last = min(first, start), max(last, end)
    kernels = _kernel_work(found, launcher)
    run_seconds = step_seconds if steps else max(0.0, (last - first) * 1e-6)
    dominant = max(dtype_flops, key=lambda d: dtype_flops[d]) if dtype_flops else "fp32"
    return EfficiencyReport(
        device,
        has_gpu,
        {name: work for name, work in markers.items() if work.total_flops or work.bytes},
        dict(operators),
        kernels,
        model_flops,
        steps,
        run_seconds,
        dominant,
    )


def _innermost_launchers(
    ops: list[Any],
    launches: list[tuple[float, int]],
    launch_gpu: RangeSums,
    launcher: dict[int, tuple[Any, float]],
) -> None:
    """Each launch's innermost enclosing work op, and that op's GPU time (a sweep in time)."""
    stack: list[Any] = []
    position = 0
    for ts, correlation in launches:
        while position < len(ops) and ops[position].start <= ts:
            while stack and stack[-1].end < ops[position].start:
                stack.pop()
            stack.append(ops[position])
            position += 1
        while stack and stack[-1].end < ts:
            stack.pop()
        if stack:
            op = stack[-1]
            launcher[correlation] = (op, launch_gpu.between(op.start, op.end))


def _kernel_work(found: WorkEvents, launcher: dict[int, tuple[Any, float]]) -> dict[str, Work]:
    """GPU kernels inherit the work of the op that launched them, by their share of its GPU
    time when it launched several (then marked estimated)."""
    kernels: dict[str, Work] = {}
    gpu = found.gpu
    for name_id, duration, correlation in zip(gpu.name, gpu.duration, gpu.correlation, strict=True):
        if correlation not in launcher:
            continue
        op, op_gpu_us = launcher[correlation]
        share = duration / op_gpu_us if op_gpu_us > 0 else 1.0
        name = gpu.names[name_id]
        entry = kernels.get(name) or kernels.setdefault(name, Work())
        entry.add(
            op.work.dtype,
            op.work.flops * share,
            op.work.tensor_flops * share,
            op.work.bytes * share,
        )
        entry.seconds += duration * 1e-6
        entry.estimated = entry.estimated or share < 0.999
    return kernels


def _raised_to_observed(report: EfficiencyReport, device: DevicePeaks) -> DevicePeaks:
    """A measured peak the trace itself beat is raised to what the trace reached (a busy
    calibration must not make the program look faster than the machine)."""
    flops = dict(device.flops_per_s)
    bandwidth = device.bytes_per_s
    raised = False
    for work in [*report.markers.values(), *report.operators.values()]:
        if work.seconds <= 0:
            continue
        for dtype, amount in work.flops.items():
            rate = amount / work.seconds
            if rate > flops.get(dtype, flops.get("fp32", 0.0)):
                flops[dtype], raised = rate, True
        if work.bytes / work.seconds > bandwidth:
            bandwidth, raised = work.bytes / work.seconds, True
    if not raised:
        return device
    return replace(device, flops_per_s=flops, bytes_per_s=bandwidth, raised_to_observed=True)


__all__ = ["OVERHEAD_BELOW", "EfficiencyReport", "Work", "efficiency_report", "work_figures"]

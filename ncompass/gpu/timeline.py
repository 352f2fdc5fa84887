"""GPU samples on a trace timeline: Chrome-trace counter tracks and low-utilisation stretches.

``ncompass run --gpu-monitor`` calls these after the profiler has written its trace:

- ``add_counter_tracks`` adds the samples to a loaded trace as ``"ph": "C"`` counter events
  (``counter_events``), one track per metric per device, beside the markers in Perfetto;
- ``marker_ranges`` lists the markers' ``(name, start_us, end_us)``;
- ``low_utilisation_stretches`` finds where utilisation stayed below a threshold inside those
  ranges, and ``format_low_utilisation`` words them for the run's summary.

Clocks: a sample carries the wall clock (``time_ns``) and ``time.perf_counter_ns()``
(``monotonic_ns``). PyTorch profiler traces use the wall clock: an event's ``ts`` is wall-clock
microseconds minus the trace's ``baseTimeNanoseconds`` / 1000 (absolute microseconds when the
trace has no such field), so ``clock="wall"`` with ``torch_trace_clock_offset_us(trace)`` aligns
samples with a torch trace.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ncompass._format import format_duration
from ncompass.gpu._sample import HOST_DEVICE, GpuSample

Clock = Literal["wall", "monotonic"]

COUNTER_CATEGORY = "gpu_monitor"
MARKER_CATEGORIES = ("user_annotation",)
"""Categories of the torch profiler's CPU-side markers (``record_function`` ranges)."""

_GIB = 1024**3


def torch_trace_clock_offset_us(trace: Mapping[str, Any]) -> float:
    """The ``clock_offset_us`` that puts wall-clock samples on a PyTorch trace's time axis.

    Args:
        trace: The trace's top-level JSON object (only ``baseTimeNanoseconds`` is read; the
            ``traceEvents`` list may be left out).
    """
    base_ns = trace.get("baseTimeNanoseconds")
    return -float(base_ns) / 1000.0 if base_ns is not None else 0.0


def sample_time_us(
    sample: GpuSample, *, clock: Clock = "wall", clock_offset_us: float = 0.0
) -> float:
    """A sample's time in trace microseconds: the chosen clock plus ``clock_offset_us``."""
    ns = sample.time_ns if clock == "wall" else sample.monotonic_ns
    # add in integer nanoseconds: epoch microseconds as a float keep only ~0.25 µs precision
    return (ns + round(clock_offset_us * 1000)) / 1000.0


def counter_events(
    samples: Iterable[GpuSample],
    *,
    pid: int | str,
    clock_offset_us: float = 0.0,
    clock: Clock = "wall",
) -> list[dict[str, Any]]:
    """Chrome-trace counter events for the samples, sorted by time.

    One track per metric per device: ``GPU 0 util`` (%), ``GPU 0 memory util`` (%),
    ``GPU 0 memory used`` (GiB), ``GPU 0 power`` (W), ``GPU 0 temperature`` (°C); the host
    pseudo-device of the ``cpu`` backend is named ``CPU``. Perfetto shows each track as
    "<name> <unit>". A metric without a reading adds no event (the track keeps its last value).

    Args:
        samples: Samples, e.g. ``GpuMonitor(keep_samples=True).samples``.
        pid: The trace process the tracks belong to (a separate pid keeps them together).
        clock_offset_us: Added to every timestamp (see ``torch_trace_clock_offset_us``).
        clock: Which of the sample's clocks to use.
    """
    events: list[dict[str, Any]] = []
    for sample in samples:
        ts = round(sample_time_us(sample, clock=clock, clock_offset_us=clock_offset_us), 3)
        owner = "CPU" if sample.device == HOST_DEVICE else f"GPU {sample.device}"
        for metric, unit, value in _metrics(sample):
            events.append(
                {
                    "name": f"{owner} {metric}",
                    "cat": COUNTER_CATEGORY,
                    "ph": "C",
                    "ts": ts,
                    "pid": pid,
                    "args": {unit: value},
                }
            )
    events.sort(key=lambda event: event["ts"])
    return events


def add_counter_tracks(
    trace: MutableMapping[str, Any],
    samples: Iterable[GpuSample],
    *,
    pid: int | str | None = None,
    process_name: str = "GPU monitor",
) -> int:
    """Appends the samples' counter events to a loaded PyTorch trace, aligned to its clock.

    Args:
        trace: The trace's top-level JSON object; its ``traceEvents`` list is extended.
        samples: Samples with both clocks, e.g. ``GpuMonitor(keep_samples=True).samples``.
        pid: The process the tracks go to. Default: the process holding the markers (so the
            tracks sit beside them); without markers a new process named ``process_name``.
        process_name: The name of that new process.

    Returns:
        How many events were added.
    """
    events: list[dict[str, Any]] = trace.setdefault("traceEvents", [])
    added: list[dict[str, Any]] = []
    if pid is None:
        pid = next((e["pid"] for e in events if e.get("cat") in MARKER_CATEGORIES), None)
    if pid is None:
        pid = max((e["pid"] for e in events if isinstance(e.get("pid"), int)), default=0) + 1
        added.append(process_name_event(pid, process_name))
    offset_us = torch_trace_clock_offset_us(trace)
    added += counter_events(samples, pid=pid, clock_offset_us=offset_us)
    events.extend(added)
    return len(added)


def marker_ranges(
    trace: Mapping[str, Any], *, categories: Iterable[str] = MARKER_CATEGORIES
) -> list[tuple[str, float, float]]:
    """``(name, start_us, end_us)`` of the trace's complete events in ``categories``.

    The default is the CPU-side markers. On a GPU, the torch profiler also projects markers
    onto the device as ``gpu_user_annotation``: those ranges show when the device ran the
    marker's kernels, which is what its utilisation describes.
    """
    wanted = set(categories)
    return [
        (str(event["name"]), float(event["ts"]), float(event["ts"]) + float(event["dur"]))
        for event in trace.get("traceEvents", [])
        if event.get("ph") == "X" and event.get("cat") in wanted and "dur" in event
    ]


def process_name_event(pid: int | str, name: str = "GPU monitor") -> dict[str, Any]:
    """The metadata event that names the counter tracks' process in the trace viewer."""
    return {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}


def _metrics(sample: GpuSample) -> list[tuple[str, str, float]]:
    metrics = []
    if sample.util_gpu is not None:
        metrics.append(("util", "%", sample.util_gpu))
    if sample.util_mem is not None:
        metrics.append(("memory util", "%", sample.util_mem))
    if sample.memory_used_bytes is not None:
        metrics.append(("memory used", "GiB", round(sample.memory_used_bytes / _GIB, 4)))
    if sample.power_w is not None:
        metrics.append(("power", "W", sample.power_w))
    if sample.temperature_c is not None:
        metrics.append(("temperature", "°C", sample.temperature_c))
    return metrics


@dataclass(frozen=True)
class LowUtilisationStretch:
    """A stretch inside one range where a device's utilisation stayed below the threshold.

    Attributes:
        range_name: The name of the range (marker) it lies in.
        device: The device index.
        start_us: Start, in the ranges' (trace) microseconds.
        end_us: End, in the same clock.
        mean_util: Mean utilisation over the stretch, percent.
        samples: How many sample periods it spans.
    """

    range_name: str
    device: int
    start_us: float
    end_us: float
    mean_util: float
    samples: int

    @property
    def duration_us(self) -> float:
        """The stretch's length in microseconds."""
        return self.end_us - self.start_us


@dataclass(frozen=True)
class _Period:
    start_us: float
    end_us: float
    util: float


def low_utilisation_stretches(
    samples: Iterable[GpuSample],
    ranges: Iterable[tuple[str, float, float]],
    threshold: float,
    *,
    clock_offset_us: float = 0.0,
    clock: Clock = "wall",
    min_duration_us: float = 0.0,
) -> list[LowUtilisationStretch]:
    """Where utilisation stayed below ``threshold`` inside each range, per device.

    A sample's utilisation describes the period since the previous sample (that is how NVML,
    nvidia-smi and the cpu backend measure it), so each sample after the first covers
    ``[previous time, its time]``. Consecutive low periods merge into a stretch; a stretch is
    clipped to every range it overlaps and reported once per range. Periods without a reading
    end a stretch.

    Args:
        samples: Samples of one or more devices, in any order.
        ranges: ``(name, start_us, end_us)`` in the trace's clock, e.g. marker events'
            ``(name, ts, ts + dur)``.
        threshold: Utilisation in percent below which a period counts as low.
        clock_offset_us: Maps sample times onto the ranges' clock (see ``counter_events``).
        clock: Which of the sample's clocks to use.
        min_duration_us: Leave out clipped stretches shorter than this.

    Returns:
        The stretches, ordered by device, then range start, then stretch start.
    """
    stretches = _stretches_by_device(samples, threshold, clock, clock_offset_us)
    ordered_ranges = sorted(ranges, key=lambda item: (item[1], item[2]))
    found = []
    for device in sorted(stretches):
        device_stretches = stretches[device]
        ends = [stretch[-1].end_us for stretch in device_stretches]
        for name, start_us, end_us in ordered_ranges:
            first = bisect.bisect_right(ends, start_us)
            for stretch in device_stretches[first:]:
                if stretch[0].start_us >= end_us:
                    break
                clipped = _clip(stretch, start_us, end_us)
                if clipped and clipped[-1].end_us - clipped[0].start_us >= max(min_duration_us, 0):
                    found.append(_stretch(name, device, clipped))
    return found


def _stretches_by_device(
    samples: Iterable[GpuSample], threshold: float, clock: Clock, clock_offset_us: float
) -> dict[int, list[list[_Period]]]:
    by_device: dict[int, list[tuple[float, float | None]]] = defaultdict(list)
    for sample in samples:
        time_us = sample_time_us(sample, clock=clock, clock_offset_us=clock_offset_us)
        by_device[sample.device].append((time_us, sample.util_gpu))
    stretches: dict[int, list[list[_Period]]] = {}
    for device, points in by_device.items():
        points.sort(key=lambda point: point[0])
        runs: list[list[_Period]] = []
        current: list[_Period] = []
        for (previous_us, _), (time_us, util) in itertools.pairwise(points):
            if util is not None and util < threshold and time_us > previous_us:
                current.append(_Period(previous_us, time_us, util))
                continue
            if current:
                runs.append(current)
                current = []
        if current:
            runs.append(current)
        stretches[device] = runs
    return stretches


def _clip(stretch: Sequence[_Period], start_us: float, end_us: float) -> list[_Period]:
    clipped = []
    for period in stretch:
        low, high = max(period.start_us, start_us), min(period.end_us, end_us)
        if high > low:
            clipped.append(_Period(low, high, period.util))
    return clipped


def _stretch(name: str, device: int, periods: Sequence[_Period]) -> LowUtilisationStretch:
    total_us = sum(period.end_us - period.start_us for period in periods)
    mean = sum(period.util * (period.end_us - period.start_us) for period in periods) / total_us
    return LowUtilisationStretch(
        range_name=name,
        device=device,
        start_us=periods[0].start_us,
        end_us=periods[-1].end_us,
        mean_util=mean,
        samples=len(periods),
    )


def format_low_utilisation(
    stretches: Sequence[LowUtilisationStretch], threshold: float, *, limit: int = 10
) -> list[str]:
    """Summary lines: per range and device, the time spent below ``threshold``, worst first.

    Returns an empty list when there are no stretches.
    """
    totals: dict[tuple[str, int], list[LowUtilisationStretch]] = defaultdict(list)
    for stretch in stretches:
        totals[(stretch.range_name, stretch.device)].append(stretch)
    ranked = sorted(
        totals.items(), key=lambda item: -sum(stretch.duration_us for stretch in item[1])
    )
    if not ranked:
        return []
    lines = [f"low utilisation (< {threshold:g}%) inside markers:"]
    for (name, device), group in ranked[:limit]:
        total_us = sum(stretch.duration_us for stretch in group)
        mean = sum(stretch.mean_util * stretch.duration_us for stretch in group) / total_us
        owner = "CPU" if device == HOST_DEVICE else f"GPU {device}"
        count = f"{len(group)} stretch" + ("es" if len(group) != 1 else "")
        duration = format_duration(total_us, decimals=1)
        lines.append(f"  {name} · {owner}: {duration} at {mean:.0f}% ({count})")
    if len(ranked) > limit:
        lines.append(f"  … and {len(ranked) - limit} more")
    return lines

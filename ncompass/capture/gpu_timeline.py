"""``ncompass run --gpu-monitor``: GPU utilisation under the markers, in the run's own trace.

A :class:`~ncompass.gpu.GpuMonitor` samples while the script runs; afterwards its samples
become counter tracks (``"ph": "C"``) in the trace, on the profiler's clock, so Perfetto draws
utilisation under the markers; and the stretches where utilisation stayed low inside a marker
are reported. The trace is streamed (:mod:`ncompass.traces.counters`), never loaded whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncompass.errors import CaptureError, TraceError
from ncompass.gpu import DeviceSpec, GpuMonitor, GpuSample, GpuSummary
from ncompass.gpu import timeline as gpu_timeline
from ncompass.traces.counters import CounterPlacement, append_counter_tracks

LOW_UTILISATION_PERCENT = 30.0


@dataclass
class GpuMonitorOptions:
    """What to monitor: ``device`` as ``GpuMonitor`` takes it, the period and the backend."""

    device: DeviceSpec = 0
    interval_s: float = 0.2
    backend: str = "auto"


@dataclass
class GpuTimeline:
    """What the monitor found: per-device summaries and the low-utilisation report lines."""

    summaries: list[GpuSummary] = field(default_factory=list)
    low_utilisation: list[str] = field(default_factory=list)
    counter_events: int = 0

    def report(self) -> str:
        """The text ``ncompass run`` prints after the run."""
        parts = [summary.format() for summary in self.summaries]
        if self.low_utilisation:
            parts.append("\n".join(self.low_utilisation))
        return "\n".join(parts)


def start_monitor(options: GpuMonitorOptions) -> GpuMonitor:
    """Start sampling (falls back to the host CPU with a warning where there is no GPU)."""
    monitor = GpuMonitor(
        device=options.device,
        interval_s=options.interval_s,
        backend=options.backend,
        strict=False,
        keep_samples=True,
    )
    monitor.start()
    return monitor


def finish(
    monitor: GpuMonitor,
    trace_path: Path | None,
    *,
    windows: Sequence[tuple[Path, float, float]] = (),
) -> GpuTimeline:
    """Stop ``monitor`` and, when there is a trace, add its samples to it as counter tracks.

    Args:
        monitor: The run's monitor.
        trace_path: The whole run's trace (None: none written).
        windows: Recording windows' traces, each with its start and end (wall clock, seconds):
            each gets the samples taken while it recorded.

    Raises:
        CaptureError: the trace cannot be read back or rewritten.
    """
    monitor.stop()
    result = GpuTimeline(summaries=list(monitor.summaries))
    if not monitor.samples:
        return result
    if trace_path is not None:
        _add_counters(trace_path, monitor.samples, result)
    for window_trace, start_s, end_s in windows:
        first, last = start_s * 1e9, end_s * 1e9
        inside = [sample for sample in monitor.samples if first <= sample.time_ns <= last]
        if inside:
            _add_counters(window_trace, inside, result)
    return result


def _add_counters(trace_path: Path, samples: list[GpuSample], result: GpuTimeline) -> None:
    def counters_at(placement: CounterPlacement) -> list[dict[str, Any]]:
        added = [gpu_timeline.process_name_event(placement.pid)] if placement.new_process else []
        return added + gpu_timeline.counter_events(
            samples, pid=placement.pid, clock_offset_us=placement.clock_offset_us
        )

    try:
        placement, added = append_counter_tracks(trace_path, counters_at)
    except TraceError as error:
        raise CaptureError(f"cannot add GPU counters to the trace: {error}") from None
    result.counter_events += added
    stretches = gpu_timeline.low_utilisation_stretches(
        samples,
        placement.marker_ranges,
        LOW_UTILISATION_PERCENT,
        clock_offset_us=placement.clock_offset_us,
    )
    result.low_utilisation += gpu_timeline.format_low_utilisation(
        stretches, LOW_UTILISATION_PERCENT
    )


__all__ = ["GpuMonitorOptions", "GpuTimeline", "finish", "start_monitor"]

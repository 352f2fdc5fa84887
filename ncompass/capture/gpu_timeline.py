"""``ncompass run --gpu-monitor``: GPU utilisation under the markers, in the run's own trace.

A :class:`~ncompass.gpu.GpuMonitor` samples while the script runs; afterwards its samples
become counter tracks (``"ph": "C"``) in the trace, on the profiler's clock, so Perfetto draws
utilisation under the markers; and the stretches where utilisation stayed low inside a marker
are reported.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ncompass.errors import CaptureError
from ncompass.gpu import DeviceSpec, GpuMonitor, GpuSummary
from ncompass.gpu import timeline as gpu_timeline

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


def finish(monitor: GpuMonitor, trace_path: Path | None) -> GpuTimeline:
    """Stop ``monitor`` and, when there is a trace, add its samples to it as counter tracks.

    Raises:
        CaptureError: the trace cannot be read back or rewritten.
    """
    monitor.stop()
    result = GpuTimeline(summaries=list(monitor.summaries))
    if trace_path is None or not monitor.samples:
        return result
    trace = _load(trace_path)
    result.counter_events = gpu_timeline.add_counter_tracks(trace, monitor.samples)
    offset = gpu_timeline.torch_trace_clock_offset_us(trace)
    ranges = gpu_timeline.marker_ranges(trace)
    stretches = gpu_timeline.low_utilisation_stretches(
        monitor.samples, ranges, LOW_UTILISATION_PERCENT, clock_offset_us=offset
    )
    result.low_utilisation = gpu_timeline.format_low_utilisation(stretches, LOW_UTILISATION_PERCENT)
    _save(trace_path, trace)
    return result


def _load(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
        document = orjson.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)
    except (OSError, orjson.JSONDecodeError, gzip.BadGzipFile) as error:
        raise CaptureError(f"cannot read the trace to add GPU counters ({path}): {error}") from None
    if not isinstance(document, dict):
        raise CaptureError(f"{path}: not a Chrome trace object; GPU counters not added")
    return document


def _save(path: Path, document: dict[str, Any]) -> None:
    data = orjson.dumps(document)
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.gpu.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


__all__ = ["GpuMonitorOptions", "GpuTimeline", "finish", "start_monitor"]

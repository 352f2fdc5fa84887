"""NVTX ranges ↔ the GPU work launched inside them, on the same thread.

A GPU operation belongs to an NVTX range when the CUDA API call that launched it (found through
the correlation id they share) lies inside the range *on the same thread*, as Nsight Systems'
own projection defines it. Matching by time alone, as converters often do, would give a kernel
launched by one thread to every range that another thread had open at that moment.

:class:`ThreadRanges` is the state of one sweep over one thread's records in time order: the
ranges open so far, each collecting the launches it contains and, per stream, the span of GPU
work they caused (the range's *projection* onto that stream). Ranges leave it as soon as the
sweep passes their end, so what it holds is bounded by how many ranges are open at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ncompass.traces.nsys.records import NvtxRange, RuntimeCall

StreamKey = tuple[int, int, int, int]
"""``(process key, device, context, stream)``."""


@dataclass(slots=True)
class StreamShare:
    """The GPU work of one range on one stream."""

    start: int
    end: int
    ops: int = 0
    busy_ns: int = 0


@dataclass(slots=True)
class OpenRange:
    """A range being swept, with what it has collected so far.

    Attributes:
        record: The range.
        lane: Its lane on the thread's track (see :mod:`ncompass.traces.nsys.layout`).
        launches: Runtime calls inside it.
        gpu_ops: GPU operations those calls launched.
        gpu_ns: Their summed duration.
        gpu_start, gpu_end: First start and last end of that GPU work (None without any).
        streams: The same, per stream: the range's projection onto each stream.
    """

    record: NvtxRange
    lane: int
    launches: int = 0
    gpu_ops: int = 0
    gpu_ns: int = 0
    gpu_start: int | None = None
    gpu_end: int | None = None
    streams: dict[StreamKey, StreamShare] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LaunchLink:
    """Where one launch sits: the ranges around it, outermost first (empty outside any)."""

    ranges: tuple[OpenRange, ...]

    @property
    def innermost(self) -> OpenRange | None:
        """The range that started last among those around the launch."""
        return self.ranges[-1] if self.ranges else None

    @property
    def path(self) -> list[str]:
        """The names of the ranges around the launch, outermost first."""
        return [open_range.record.name for open_range in self.ranges]


class ThreadRanges:
    """The ranges open on one thread during a time-ordered sweep."""

    def __init__(self) -> None:
        self._open: list[OpenRange] = []  # in start order, outer first among equal starts

    def close_before(self, time: int) -> list[OpenRange]:
        """Remove and return the ranges that ended before ``time`` (nothing later is inside)."""
        if not self._open or all(r.record.end >= time for r in self._open):
            return []
        ended = [r for r in self._open if r.record.end < time]
        self._open = [r for r in self._open if r.record.end >= time]
        return ended

    def close_all(self) -> list[OpenRange]:
        """Remove and return every range (the thread's records are exhausted)."""
        ended, self._open = self._open, []
        return ended

    def open(self, record: NvtxRange, lane: int) -> None:
        """Start collecting for ``record``."""
        self._open.append(OpenRange(record, lane))

    def launch(self, call: RuntimeCall) -> LaunchLink:
        """Credit ``call`` and its GPU operations to every open range that contains the call."""
        around = tuple(
            r for r in self._open if r.record.start <= call.start and call.end <= r.record.end
        )
        for open_range in around:
            open_range.launches += 1
            for op in call.ops:
                duration = op.end - op.start
                open_range.gpu_ops += 1
                open_range.gpu_ns += duration
                if open_range.gpu_start is None or op.start < open_range.gpu_start:
                    open_range.gpu_start = op.start
                if open_range.gpu_end is None or op.end > open_range.gpu_end:
                    open_range.gpu_end = op.end
                key = (op.process, op.device, op.context, op.stream)
                share = open_range.streams.get(key)
                if share is None:
                    share = open_range.streams[key] = StreamShare(op.start, op.end)
                share.start = min(share.start, op.start)
                share.end = max(share.end, op.end)
                share.ops += 1
                share.busy_ns += duration
        return LaunchLink(around)


__all__ = ["LaunchLink", "OpenRange", "StreamKey", "StreamShare", "ThreadRanges"]

"""The passes that turn one export into a Chrome trace, streamed event by event.

1. **Threads.** Every thread's ranges, CUDA API calls, OS calls and marks, merged into one
   time-ordered stream per thread (each query is sorted by the database). One sweep lays the
   slices out in lanes, credits each launch to the ranges around it on that thread
   (:mod:`~ncompass.traces.nsys.linking`), writes each range once the sweep has passed its end,
   and records what the later passes need in temporary tables.
2. **GPU work.** Kernels, copies and sets by stream and start, laid out in lanes, each with its
   correlation, the ranges around its launch, and the head of its launch arrow.
3. **Ranges across threads.** Start/end ranges that end on another thread, as begin/end pairs.
4. **Projections.** Each range's GPU work per stream, by stream and start, laid out in lanes.
5. **Names.** Process and thread names and sort order for every track used.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ncompass.traces.events import Event
from ncompass.traces.nsys import chrome
from ncompass.traces.nsys.layout import LaneLayout
from ncompass.traces.nsys.linking import OpenRange, ThreadRanges
from ncompass.traces.nsys.queries import ReportQueries
from ncompass.traces.nsys.records import (
    CpuRecord,
    NvtxMark,
    NvtxRange,
    OsCall,
    RuntimeCall,
    thread_order,
)
from ncompass.traces.nsys.schema import os_tid, process_key
from ncompass.traces.nsys.tracks import ReportNames, Track, TrackTable

_BATCH = 1000  # rows per insert into the temporary tables
_OUTPUT_BATCH = 1024  # events per write to the trace file
_PATH_SEPARATOR = "\x1f"  # cannot appear in range names people write
_KIND_CODES = {"kernel": 0, "memcpy": 1, "memset": 2}


@dataclass
class ConversionStats:
    """What a conversion found and wrote.

    Attributes:
        kernels, memcpys, memsets: GPU operations of each kind.
        gpu_ops_launched: GPU operations whose launching CUDA API call is in the report.
        gpu_ops_in_ranges: GPU operations launched inside at least one NVTX range.
        runtime_calls: CUDA API calls.
        nvtx_ranges: NVTX ranges that begin and end on one thread.
        cross_thread_ranges: Start/end ranges that end on another thread (not projected).
        nvtx_marks: NVTX marks.
        os_calls: OS runtime library calls.
        projections: Projected ranges (one per range and stream it launched work on).
        overlap_lanes: Extra tracks opened because slices overlapped without nesting.
        events: Events written.
    """

    kernels: int = 0
    memcpys: int = 0
    memsets: int = 0
    gpu_ops_launched: int = 0
    gpu_ops_in_ranges: int = 0
    runtime_calls: int = 0
    nvtx_ranges: int = 0
    cross_thread_ranges: int = 0
    nvtx_marks: int = 0
    os_calls: int = 0
    projections: int = 0
    overlap_lanes: int = 0
    events: int = 0

    @property
    def gpu_ops(self) -> int:
        """Kernels, copies and sets together."""
        return self.kernels + self.memcpys + self.memsets


@dataclass
class _CorrelationIds:
    """Correlation ids are unique per process: numbered per process to be unique per trace."""

    ordinals: dict[int, int] = field(default_factory=dict)

    def unique(self, process: int, correlation: int | None) -> int | None:
        if correlation is None:
            return None
        ordinal = self.ordinals.setdefault(process, len(self.ordinals))
        return (ordinal << 32) | correlation  # the first process keeps the report's ids


class ReportConverter:
    """Runs the passes over one export, handing every event to ``emit``.

    Args:
        queries: The export to read.
        emit: Receives the events (in no particular time order).
        progress: Called now and then with how many more rows were read (for a progress bar).
    """

    def __init__(
        self,
        queries: ReportQueries,
        emit: Callable[[Iterable[Event]], None],
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.queries = queries
        self.stats = ConversionStats()
        self._emit_many = emit
        self._progress = progress
        self._rows_read = 0
        self._rows_reported = 0
        self._correlations = _CorrelationIds()
        self._nvtx = queries.nvtx_names()
        names = ReportNames(queries.process_names(), queries.thread_names(), queries.gpu_names())
        self._tracks = TrackTable(names)
        self._links: list[tuple[int, int, int, str | None, str | None]] = []
        self._projections: list[tuple[object, ...]] = []
        self._pending: list[Event] = []  # written in batches: far fewer, larger writes

    def run(self) -> ConversionStats:
        """Convert everything; returns the counts."""
        end_of_report = self.queries.end_of_report()
        self.queries.create_work_tables()
        self._threads(end_of_report)
        self._gpu_work()
        self._ranges_across_threads(end_of_report)
        self._projected_ranges()
        self._emit(self._tracks.metadata_events())
        self._flush_events()
        return self.stats

    # ------------------------------------------------------------------ pass 1: threads

    def _threads(self, end_of_report: int) -> None:
        queries = self.queries
        records: Iterable[CpuRecord] = heapq.merge(
            queries.thread_ranges(self._nvtx, end_of_report),
            queries.runtime_calls(),
            queries.os_calls(),
            queries.marks(self._nvtx),
            key=thread_order,
        )
        thread: int | None = None
        layout = LaneLayout()
        ranges = ThreadRanges()
        for record in records:
            self._rows_read += 1
            if record.global_tid != thread:
                self._finish_ranges(ranges.close_all())
                self._count_lanes(layout)
                thread, layout = record.global_tid, LaneLayout()
            self._finish_ranges(ranges.close_before(record.start))
            if isinstance(record, NvtxMark):
                self._emit((chrome.nvtx_mark_event(record, self._tracks.thread(thread)),))
                self.stats.nvtx_marks += 1
                continue
            lane = layout.place(record.start, record.end)
            track = self._tracks.thread(thread, lane)
            if isinstance(record, NvtxRange):
                ranges.open(record, lane)
            elif isinstance(record, RuntimeCall):
                self._runtime_call(record, ranges, track)
            elif isinstance(record, OsCall):
                self._emit((chrome.os_call_event(record, track),))
                self.stats.os_calls += 1
        self._finish_ranges(ranges.close_all())
        self._count_lanes(layout)
        self._flush_links()
        self._flush_projections()

    def _runtime_call(self, call: RuntimeCall, ranges: ThreadRanges, track: Track) -> None:
        self.stats.runtime_calls += 1
        correlation = self._correlations.unique(process_key(call.global_tid), call.correlation)
        events = [chrome.runtime_call_event(call, track, correlation)]
        link = ranges.launch(call)
        if call.ops and correlation is not None:
            events.append(chrome.launch_flow_start(call, track, correlation))
            inner = link.innermost
            name = inner.record.name if inner is not None else None
            path = _PATH_SEPARATOR.join(link.path) if link.ranges else None
            first = min(call.ops, key=lambda op: (op.start, op.row))
            for op in call.ops:
                self._links.append((_KIND_CODES[op.kind], op.row, op is first, name, path))
            if len(self._links) >= _BATCH:
                self._flush_links()
        self._emit(events)

    def _finish_ranges(self, finished: list[OpenRange]) -> None:
        for open_range in finished:
            record = open_range.record
            track = self._tracks.thread(record.global_tid, open_range.lane)
            self._emit((chrome.nvtx_range_event(open_range, track),))
            self.stats.nvtx_ranges += 1
            tid = os_tid(record.global_tid)
            for (process, device, context, stream), share in open_range.streams.items():
                self._projections.append(
                    (
                        process,
                        device,
                        context,
                        stream,
                        share.start,
                        share.end,
                        record.name,
                        record.attributes.domain,
                        share.ops,
                        share.busy_ns,
                        tid,
                    )
                )
            if len(self._projections) >= _BATCH:
                self._flush_projections()

    # ------------------------------------------------------------------ pass 2: GPU work

    def _gpu_work(self) -> None:
        stream: tuple[int, int, int, int] | None = None
        layout = LaneLayout()
        stats = self.stats
        for op in self.queries.gpu_ops():
            self._rows_read += 1
            key = (op.process, op.device, op.context, op.stream)
            if key != stream:
                self._count_lanes(layout)
                stream, layout = key, LaneLayout()
            track = self._tracks.stream(*key, lane=layout.place(op.start, op.end))
            correlation = self._correlations.unique(op.process, op.correlation)
            events = [chrome.gpu_op_event(op, track, correlation)]
            if op.launched and op.first_of_launch and correlation is not None:
                events.append(chrome.launch_flow_end(op, track, correlation))
            self._emit(events)
            if op.kind == "kernel":
                stats.kernels += 1
            elif op.kind == "memcpy":
                stats.memcpys += 1
            else:
                stats.memsets += 1
            stats.gpu_ops_launched += op.launched
            stats.gpu_ops_in_ranges += op.nvtx_range is not None
        self._count_lanes(layout)

    # ------------------------------------------------------------------ pass 3 and 4

    def _ranges_across_threads(self, end_of_report: int) -> None:
        for record in self.queries.cross_thread_ranges(self._nvtx, end_of_report):
            start = self._tracks.thread(record.global_tid)
            end = self._tracks.thread(record.end_global_tid or record.global_tid)
            self._emit(chrome.nvtx_async_events(record, start, end))
            self.stats.cross_thread_ranges += 1

    def _projected_ranges(self) -> None:
        stream: tuple[int, int, int, int] | None = None
        layout = LaneLayout()
        for row in self.queries.projections():
            process, device, context, stream_id, start, end, name, domain, ops, busy, tid = row
            key = (process, device, context, stream_id)
            if key != stream:
                self._count_lanes(layout)
                stream, layout = key, LaneLayout()
            track = self._tracks.projection(*key, lane=layout.place(start, end))
            self._emit((chrome.projection_event(name, domain, track, start, end, ops, busy, tid),))
            self.stats.projections += 1
        self._count_lanes(layout)

    # ------------------------------------------------------------------ helpers

    def _emit(self, events: Iterable[Event]) -> None:
        self._pending.extend(events)
        if len(self._pending) >= _OUTPUT_BATCH:
            self._flush_events()

    def _flush_events(self) -> None:
        self.stats.events += len(self._pending)
        self._emit_many(self._pending)
        self._pending = []
        if self._progress is not None:
            self._progress(self._rows_read - self._rows_reported)
            self._rows_reported = self._rows_read

    def _count_lanes(self, layout: LaneLayout) -> None:
        self.stats.overlap_lanes += max(layout.lane_count - 1, 0)

    def _flush_links(self) -> None:
        if self._links:
            self.queries.add_op_links(self._links)
            self._links = []

    def _flush_projections(self) -> None:
        if self._projections:
            self.queries.add_projections(self._projections)
            self._projections = []


__all__ = ["ConversionStats", "ReportConverter"]

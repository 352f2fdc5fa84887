"""The part of a linked run trace that some of its processes recorded.

A run's merged trace keeps each process's OS pid on its CPU events. A process's part holds the
markers and launches of its threads, the GPU events linked to one of its launches (correlation
ids are unique in a merged trace, so a link never crosses processes), and the unlinked GPU
events on its tracks: its own, and the GPU streams whose linked events only it launched. CPU
operators are folded by name over the whole file, without their pid: a part has none, and its
CPU span runs from its first marker or launch to its last.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection
from typing import Any

from ncompass.traces._collector import (
    INDEX,
    NO_LINK,
    GpuEvents,
    LaunchCalls,
    LinkedTrace,
    Marker,
)
from ncompass.traces.identity import PROCESSES_KEY


def trace_of_processes(trace: LinkedTrace, pids: Collection[int]) -> LinkedTrace:
    """The part of a linked run trace recorded by the processes ``pids``, linked as it was.

    Args:
        trace: A linked trace (a run's merged trace).
        pids: The OS pids of the processes to keep.

    Returns:
        A linked trace sharing ``trace``'s names and threads (indices stay valid), holding only
        those processes' markers, launches and GPU events; its metadata is ``trace``'s without
        the process list.
    """
    wanted = set(pids)
    ours = bytes(pid in wanted for pid, _ in trace.threads)  # per thread: 1 when kept
    part = LinkedTrace(
        trace.path,
        metadata={key: value for key, value in trace.metadata.items() if key != PROCESSES_KEY},
        names=trace.names,
        threads=trace.threads,
        thread_names=trace.thread_names,
        origin_us=trace.origin_us,
    )
    marker_index = _keep_markers(trace, ours, part)
    launch_index = _keep_launches(trace, ours, marker_index, part)
    _keep_gpu_events(trace, ours, launch_index, part)
    counts = {"markers": len(part.markers), "launches": len(part.launches), "gpu": len(part.gpu)}
    part.event_counts = {key: value for key, value in counts.items() if value}
    return part


def _keep_markers(trace: LinkedTrace, ours: bytes, part: LinkedTrace) -> dict[int, int]:
    """Copy the markers on the kept threads; returns old index -> new index."""
    kept: dict[int, int] = {}
    for index, marker in enumerate(trace.markers):
        if ours[marker.thread]:
            kept[index] = len(part.markers)
            copy = Marker(marker.name, marker.thread, marker.start, marker.duration, marker.parent)
            copy.nested_us = marker.nested_us
            part.markers.append(copy)
            _widen_cpu_span(part, marker.start, marker.end)
    for marker in part.markers:  # a parent is on the same thread, so it was kept too
        marker.parent = kept.get(marker.parent, NO_LINK)
    return kept


def _keep_launches(
    trace: LinkedTrace, ours: bytes, marker_index: dict[int, int], part: LinkedTrace
) -> array[int]:
    """Copy the launches on the kept threads; returns old index -> new index (or NO_LINK)."""
    source = trace.launches
    keep = [index for index, thread in enumerate(source.thread) if ours[thread]]
    launches = LaunchCalls(
        name=_taken(source.name, keep),
        thread=_taken(source.thread, keep),
        start=_taken(source.start, keep),
        duration=_taken(source.duration, keep),
        correlation=_taken(source.correlation, keep),
    )
    if len(source.marker) == len(source):
        launches.marker = array(
            INDEX,
            [marker_index.get(marker, NO_LINK) for marker in map(source.marker.__getitem__, keep)],
        )
    else:
        launches.marker = array(INDEX, [NO_LINK]) * len(keep)
    new_index = array("l", [NO_LINK]) * len(source)
    for new, old in enumerate(keep):
        new_index[old] = new
    for old, others in source.also_inside.items():
        if new_index[old] != NO_LINK:
            launches.also_inside[new_index[old]] = [marker_index[other] for other in others]
    if keep:
        starts, durations = launches.start, launches.duration
        _widen_cpu_span(part, min(starts), max(map(float.__add__, starts, durations)))
    part.launches = launches
    return new_index


def _keep_gpu_events(
    trace: LinkedTrace, ours: bytes, launch_index: array[int], part: LinkedTrace
) -> None:
    """Copy the GPU events the processes launched, and the unlinked ones on their tracks."""
    source = trace.gpu
    if len(source.launch) == len(source):
        own_streams = _streams_of(trace, ours)
        keep = [
            index
            for index, (stream, launch) in enumerate(zip(source.stream, source.launch, strict=True))
            if (launch_index[launch] != NO_LINK if launch != NO_LINK else own_streams[stream])
        ]
        launch = array(
            INDEX,
            [
                launch_index[old] if old != NO_LINK else NO_LINK
                for old in map(source.launch.__getitem__, keep)
            ],
        )
    else:
        keep = [index for index, stream in enumerate(source.stream) if ours[stream]]
        launch = array(INDEX, [NO_LINK]) * len(keep)
    part.gpu = GpuEvents(
        name=_taken(source.name, keep),
        kernel_class=_taken(source.kernel_class, keep),
        stream=_taken(source.stream, keep),
        start=_taken(source.start, keep),
        duration=_taken(source.duration, keep),
        correlation=_taken(source.correlation, keep),
        launch=launch,
        bytes=_taken(source.bytes, keep),
    )


def _streams_of(trace: LinkedTrace, ours: bytes) -> bytes:
    """Per thread or stream, 1 when it is a track of the processes: one of their own threads,
    or a GPU stream (on a device's pid, not a process's) whose linked events they all launched."""
    launch_thread = trace.launches.thread
    theirs: set[int] = set()
    others: set[int] = set()
    for stream, launch in zip(trace.gpu.stream, trace.gpu.launch, strict=True):
        if launch != NO_LINK:
            (theirs if ours[launch_thread[launch]] else others).add(stream)
    own = bytearray(ours)
    for stream in theirs - others:
        own[stream] = 1
    return bytes(own)


def _taken(column: array[Any], keep: list[int]) -> array[Any]:
    """The entries of ``column`` at ``keep``, as a column of the same type."""
    return array(column.typecode, map(column.__getitem__, keep))


def _widen_cpu_span(part: LinkedTrace, start: float, end: float) -> None:
    if start < part.cpu_start:
        part.cpu_start = start
    if end > part.cpu_end:
        part.cpu_end = end


__all__ = ["trace_of_processes"]

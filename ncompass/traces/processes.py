"""The part of a linked run trace that some of its processes recorded.

A run's merged trace keeps each process's OS pid on its CPU events. A process's part holds the
markers and launches of its threads, the GPU events linked to one of its launches (correlation
ids are unique in a merged trace, so a link never crosses processes), and the unlinked GPU
events on its tracks: its own, and the GPU streams whose linked events only it launched. CPU
operators are folded by name over the whole file, without their pid: a part has none, and its
CPU span runs from its first marker or launch to its last.
"""

from __future__ import annotations

from collections.abc import Collection

from ncompass.traces._collector import NO_LINK, GpuEvents, LaunchCalls, LinkedTrace, Marker
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
    threads = {index for index, (pid, _) in enumerate(trace.threads) if pid in wanted}
    part = LinkedTrace(
        trace.path,
        metadata={key: value for key, value in trace.metadata.items() if key != PROCESSES_KEY},
        names=trace.names,
        threads=trace.threads,
        thread_names=trace.thread_names,
        origin_us=trace.origin_us,
    )
    marker_index = _keep_markers(trace, threads, part)
    launch_index = _keep_launches(trace, threads, marker_index, part)
    _keep_gpu_events(trace, threads, launch_index, part)
    counts = {"markers": len(part.markers), "launches": len(part.launches), "gpu": len(part.gpu)}
    part.event_counts = {key: value for key, value in counts.items() if value}
    return part


def _keep_markers(trace: LinkedTrace, threads: set[int], part: LinkedTrace) -> dict[int, int]:
    """Copy the markers on ``threads``; returns old index -> new index."""
    kept: dict[int, int] = {}
    for index, marker in enumerate(trace.markers):
        if marker.thread in threads:
            kept[index] = len(part.markers)
            part.markers.append(
                Marker(marker.name, marker.thread, marker.start, marker.duration, marker.parent)
            )
            part.markers[-1].nested_us = marker.nested_us
            _widen_cpu_span(part, marker.start, marker.end)
    for marker in part.markers:  # a parent is on the same thread, so it was kept too
        marker.parent = kept.get(marker.parent, NO_LINK)
    return kept


def _keep_launches(
    trace: LinkedTrace, threads: set[int], marker_index: dict[int, int], part: LinkedTrace
) -> dict[int, int]:
    """Copy the launches on ``threads``; returns old index -> new index."""
    source, launches = trace.launches, LaunchCalls()
    kept: dict[int, int] = {}
    for index, thread in enumerate(source.thread):
        if thread not in threads:
            continue
        kept[index] = len(launches)
        start, duration = source.start[index], source.duration[index]
        launches.name.append(source.name[index])
        launches.thread.append(thread)
        launches.start.append(start)
        launches.duration.append(duration)
        launches.correlation.append(source.correlation[index])
        marker = source.marker[index] if len(source.marker) > index else NO_LINK
        launches.marker.append(marker_index.get(marker, NO_LINK))
        others = source.also_inside.get(index)
        if others:
            launches.also_inside[kept[index]] = [marker_index[other] for other in others]
        _widen_cpu_span(part, start, start + duration)
    part.launches = launches
    return kept


def _keep_gpu_events(
    trace: LinkedTrace, threads: set[int], launch_index: dict[int, int], part: LinkedTrace
) -> None:
    """Copy the GPU events the processes launched, and the unlinked ones on their tracks."""
    source, gpu = trace.gpu, GpuEvents()
    linked = len(source.launch) == len(source)
    own_streams = _streams_of(trace, threads) if linked else threads
    for index, stream in enumerate(source.stream):
        launch = source.launch[index] if linked else NO_LINK
        own_launch = launch_index.get(launch, NO_LINK)
        if own_launch == NO_LINK and (launch != NO_LINK or stream not in own_streams):
            continue  # launched by another process, or on a track of none of these
        gpu.name.append(source.name[index])
        gpu.kernel_class.append(source.kernel_class[index])
        gpu.stream.append(stream)
        gpu.start.append(source.start[index])
        gpu.duration.append(source.duration[index])
        gpu.correlation.append(source.correlation[index])
        gpu.launch.append(own_launch)
        gpu.bytes.append(source.bytes[index])
    part.gpu = gpu


def _streams_of(trace: LinkedTrace, threads: set[int]) -> set[int]:
    """The tracks of the processes: their own threads, and the GPU streams (on a device's pid,
    not the process's) whose linked events they all launched."""
    launch_thread = trace.launches.thread
    ours: set[int] = set()
    others: set[int] = set()
    for stream, launch in zip(trace.gpu.stream, trace.gpu.launch, strict=True):
        if launch != NO_LINK:
            (ours if launch_thread[launch] in threads else others).add(stream)
    return threads | (ours - others)


def _widen_cpu_span(part: LinkedTrace, start: float, end: float) -> None:
    if start < part.cpu_start:
        part.cpu_start = start
    if end > part.cpu_end:
        part.cpu_end = end


__all__ = ["trace_of_processes"]

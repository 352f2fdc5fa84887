"""Chrome-trace processes and threads for the report's processes, threads, GPUs and streams.

- A CPU process keeps its OS pid; each thread its OS tid (so ncompass analysis links launches to
  the NVTX ranges of the same thread, as it does for Kineto traces).
- Each GPU a process used becomes a process of its own, ``GPU 0 (NVIDIA H100)``, whose threads
  are the streams (tid = stream id) and, after each stream, the track of the NVTX ranges
  projected onto it (``stream 7 · NVTX``).
- Lane *k* of any track (see :mod:`ncompass.traces.nsys.layout`) is one more thread named
  ``<track> · overlap k``, sorted right after it.

Synthetic ids start above any Linux pid/tid (at most 2**22), so they never collide with real ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ncompass.traces.events import OVERLAP_OF_KEY
from ncompass.traces.nsys.schema import os_pid, os_tid, process_pid

_SYNTHETIC_BASE = 1 << 24


@dataclass(frozen=True)
class Track:
    """One Chrome-trace thread: where events are drawn."""

    pid: int
    tid: int


@dataclass
class ReportNames:
    """Names the report gives its processes, threads and GPUs.

    Attributes:
        processes: Process key -> process name.
        threads: ``globalTid`` -> thread name.
        gpus: Device id -> GPU name.
    """

    processes: dict[int, str] = field(default_factory=dict)
    threads: dict[int, str] = field(default_factory=dict)
    gpus: dict[int, str] = field(default_factory=dict)


@dataclass
class _TrackInfo:
    name: str
    sort_key: tuple[Any, ...]
    overlap_of: int | None = None  # an overlap lane's own track (its tid)


@dataclass
class _ProcessInfo:
    name: str
    sort_key: tuple[Any, ...]
    tracks: dict[int, _TrackInfo] = field(default_factory=dict)


class TrackTable:
    """Hands out Chrome pids/tids, the same ones every time for the same thing, and names them.

    Args:
        names: The report's process, thread and GPU names.
    """

    def __init__(self, names: ReportNames) -> None:
        self._names = names
        self._processes: dict[int, _ProcessInfo] = {}  # Chrome pid -> info
        self._cpu_pids: dict[int, int] = {}  # process key -> Chrome pid
        self._gpu_pids: dict[tuple[int, int], int] = {}  # (process key, device) -> Chrome pid
        self._tracks: dict[tuple[Any, ...], Track] = {}
        self._next_id = _SYNTHETIC_BASE
        self._several_processes = len(names.processes) > 1

    def cpu_pid(self, process: int) -> int:
        """The Chrome pid of a CPU process (its OS pid unless another process has it)."""
        pid = self._cpu_pids.get(process)
        if pid is None:
            pid = process_pid(process)
            if pid in self._processes:  # the same pid on another machine of the report
                pid = self._synthetic_id()
            name = self._names.processes.get(process) or f"process {process_pid(process)}"
            self._processes[pid] = _ProcessInfo(name, (0, process_pid(process), process))
            self._cpu_pids[process] = pid
        return pid

    def thread(self, global_tid: int, lane: int = 0) -> Track:
        """The track of a CPU thread (lane 0) or of one of its overlap lanes."""
        key = ("thread", global_tid, lane)
        track = self._tracks.get(key)
        if track is None:
            pid = self.cpu_pid(global_tid >> 24)
            tid = os_tid(global_tid)
            base = self._names.threads.get(global_tid) or f"thread {tid}"
            main_thread_first = 0 if tid == os_pid(global_tid) else 1
            sort_key = (main_thread_first, tid, lane)
            own = self.thread(global_tid).tid if lane else None
            track = self._add(
                key, pid, tid if lane == 0 else None, _lane_name(base, lane), sort_key, own
            )
        return track

    def stream(self, process: int, device: int, context: int, stream: int, lane: int = 0) -> Track:
        """The track of a GPU stream (lane 0) or of one of its overlap lanes."""
        return self._gpu_track("stream", process, device, context, stream, lane)

    def projection(
        self, process: int, device: int, context: int, stream: int, lane: int = 0
    ) -> Track:
        """The track of the NVTX ranges projected onto a stream (and its overlap lanes)."""
        return self._gpu_track("projection", process, device, context, stream, lane)

    def metadata_events(self) -> Iterator[dict[str, Any]]:
        """``process_name``/``thread_name`` and sort-index events for every track handed out."""
        ordered = sorted(self._processes.items(), key=lambda item: item[1].sort_key)
        for process_index, (pid, process) in enumerate(ordered):
            yield _metadata(pid, 0, "process_name", {"name": process.name})
            yield _metadata(pid, 0, "process_sort_index", {"sort_index": process_index})
            tracks = sorted(process.tracks.items(), key=lambda item: item[1].sort_key)
            for track_index, (tid, info) in enumerate(tracks):
                names: dict[str, Any] = {"name": info.name}
                if info.overlap_of is not None:
                    names[OVERLAP_OF_KEY] = info.overlap_of
                yield _metadata(pid, tid, "thread_name", names)
                yield _metadata(pid, tid, "thread_sort_index", {"sort_index": track_index})

    def _gpu_track(
        self, role: str, process: int, device: int, context: int, stream: int, lane: int
    ) -> Track:
        key = (role, process, device, context, stream, lane)
        track = self._tracks.get(key)
        if track is None:
            pid = self._gpu_pid(process, device)
            base = f"stream {stream}" if role == "stream" else f"stream {stream} · NVTX"
            wanted = stream if role == "stream" and lane == 0 else None
            sort_key = (context, stream, 0 if role == "stream" else 1, lane)
            own = self._gpu_track(role, process, device, context, stream, 0).tid if lane else None
            track = self._add(key, pid, wanted, _lane_name(base, lane), sort_key, own)
        return track

    def _gpu_pid(self, process: int, device: int) -> int:
        pid = self._gpu_pids.get((process, device))
        if pid is None:
            pid = self._gpu_pids[(process, device)] = self._synthetic_id()
            gpu = self._names.gpus.get(device)
            name = f"GPU {device}" + (f" ({gpu})" if gpu else "")
            if self._several_processes:
                name += f", process {process_pid(process)}"
            self._processes[pid] = _ProcessInfo(name, (1, device, process_pid(process), process))
        return pid

    def _add(
        self,
        key: tuple[Any, ...],
        pid: int,
        wanted_tid: int | None,
        name: str,
        sort_key: tuple[Any, ...],
        overlap_of: int | None = None,
    ) -> Track:
        tracks = self._processes[pid].tracks
        tid = wanted_tid if wanted_tid is not None and wanted_tid not in tracks else None
        if tid is None:
            tid = self._synthetic_id()
        tracks[tid] = _TrackInfo(name, sort_key, overlap_of)
        track = self._tracks[key] = Track(pid, tid)
        return track

    def _synthetic_id(self) -> int:
        self._next_id += 1
        return self._next_id


def _lane_name(base: str, lane: int) -> str:
    return base if lane == 0 else f"{base} · overlap {lane}"


def _metadata(pid: int, tid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


__all__ = ["ReportNames", "Track", "TrackTable"]

"""Reads the recorder's output files into ranges, marks and threads.

Each process writes one JSON-lines file (format described in ``nvtx_recorder.c``). Push/pop
events are paired per thread and domain (NVTX keeps one stack per thread and domain); start/end
events are paired by range id across all threads of the process.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ncompass.errors import TraceError

RangeKind = Literal["push_pop", "start_end"]


@dataclass(frozen=True)
class NvtxRange:
    """One NVTX range.

    Attributes:
        name: The range's message ("" when it had none).
        domain: The NVTX domain name ("" for the default domain).
        kind: ``"push_pop"`` (nested per thread) or ``"start_end"`` (may overlap, may end on
            another thread).
        pid: Process id.
        tid: OS thread id of the thread that began the range.
        start_ns: Begin time, ``CLOCK_MONOTONIC`` nanoseconds.
        end_ns: End time, or None when the range was still open at exit.
        end_tid: Thread that ended the range, or None when it never ended.
        depth: Nesting level among push/pop ranges of its thread and domain (0 = outermost);
            0 for start/end ranges.
        color: ARGB colour, when one was given.
        category: Category id, when one was given.
        category_name: The category's registered name, when it has one.
        payload: The integer or float payload, when one was given.
        range_id: The NVTX range id of a start/end range.
    """

    name: str
    domain: str
    kind: RangeKind
    pid: int
    tid: int
    start_ns: int
    end_ns: int | None
    end_tid: int | None
    depth: int = 0
    color: int | None = None
    category: int | None = None
    category_name: str | None = None
    payload: int | float | None = None
    range_id: int | None = None

    @property
    def duration_ns(self) -> int | None:
        """``end_ns - start_ns``, or None for a range that never ended."""
        return None if self.end_ns is None else self.end_ns - self.start_ns


@dataclass(frozen=True)
class NvtxMark:
    """An instantaneous NVTX marker (``nvtxMark*``)."""

    name: str
    domain: str
    pid: int
    tid: int
    time_ns: int
    color: int | None = None
    category: int | None = None
    payload: int | float | None = None


@dataclass(frozen=True)
class NvtxThread:
    """A thread that emitted NVTX events.

    Attributes:
        pid: Process id.
        tid: OS thread id.
        os_name: The kernel's name for the thread (``/proc/.../comm``) when it first emitted.
        name: The name given through ``nvtxNameOsThread``, when there was one.
        dropped_events: Events lost because the per-process budget was spent.
    """

    pid: int
    tid: int
    os_name: str
    name: str | None = None
    dropped_events: int = 0

    @property
    def display_name(self) -> str:
        """The NVTX-given name, else the OS name."""
        return self.name or self.os_name


@dataclass
class NvtxRecording:
    """Everything one process recorded.

    Attributes:
        path: The file it was read from.
        pid: Process id; ``ppid``: its parent's.
        cmdline: The process's command line.
        clock: The clock of every timestamp (``CLOCK_MONOTONIC``).
        written_monotonic_ns, written_realtime_ns: Both clocks read at the same moment when the
            file was written, to convert timestamps to wall-clock time.
        ranges: Ranges in order of their start time.
        marks: Marks in time order.
        threads: Threads by tid.
        domains: Domain names by id (0 is the default domain, named "").
        dropped_events: Events lost because the budget was spent.
        unmatched_pops: Pops with no push on their thread and domain (pushed before the
            recorder attached, or an unbalanced caller).
        unmatched_ends: Ends whose start was not recorded.
    """

    path: Path
    pid: int
    ppid: int
    cmdline: str
    clock: str
    written_monotonic_ns: int
    written_realtime_ns: int
    ranges: list[NvtxRange] = field(default_factory=list)
    marks: list[NvtxMark] = field(default_factory=list)
    threads: dict[int, NvtxThread] = field(default_factory=dict)
    domains: dict[int, str] = field(default_factory=dict)
    dropped_events: int = 0
    unmatched_pops: int = 0
    unmatched_ends: int = 0

    def to_realtime_ns(self, monotonic_ns: int) -> int:
        """Converts a recorded timestamp to nanoseconds since the Unix epoch."""
        return monotonic_ns - self.written_monotonic_ns + self.written_realtime_ns


def read_recordings(output_dir: str | os.PathLike[str]) -> list[NvtxRecording]:
    """Reads every process's recording in ``output_dir``, ordered by process id.

    Args:
        output_dir: The directory given to :func:`ncompass.capture.nvtx_recorder.environment`.

    Returns:
        One :class:`NvtxRecording` per process that used NVTX (none when no process did).

    Raises:
        TraceError: The directory is missing or a file is not a recorder output.
    """
    directory = Path(output_dir)
    if not directory.is_dir():
        raise TraceError(f"{directory}: NVTX recording directory does not exist")
    recordings = [read_recording(path) for path in sorted(directory.glob("nvtx-*.jsonl"))]
    return sorted(recordings, key=lambda recording: recording.pid)


def read_recording(path: str | os.PathLike[str]) -> NvtxRecording:
    """Reads one process's recording file.

    Raises:
        TraceError: The file is missing, empty, or not a recorder output.
    """
    file_path = Path(path)
    try:
        with file_path.open(encoding="utf-8", errors="replace") as lines:
            return _Reader(file_path).read(lines)
    except OSError as error:
        raise TraceError(f"{file_path}: cannot read NVTX recording: {error}") from error


_OpenPush = tuple[int, dict[str, Any]]


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.strings: dict[int, str] = {}
        self.categories: dict[tuple[int, int], str] = {}
        self.thread_names: dict[int, str] = {}
        self.stacks: dict[tuple[int, int], list[_OpenPush]] = {}
        self.starts: dict[int, tuple[int, dict[str, Any]]] = {}
        self.ends: dict[int, tuple[int, int]] = {}

    def read(self, lines: Any) -> NvtxRecording:
        header = self._header(lines)
        recording = NvtxRecording(
            path=self.path,
            pid=int(header["pid"]),
            ppid=int(header.get("ppid", 0)),
            cmdline=str(header.get("cmdline", "")),
            clock=str(header.get("clock", "CLOCK_MONOTONIC")),
            written_monotonic_ns=int(header.get("monotonic_ns", 0)),
            written_realtime_ns=int(header.get("realtime_ns", 0)),
            dropped_events=int(header.get("dropped", 0)),
        )
        os_names: dict[int, tuple[str, int]] = {}
        for number, line in enumerate(lines, start=2):
            record = self._parse(line, number)
            if record is None:
                continue
            kind = record.get("e")
            if kind is not None:
                self._event(recording, kind, record)
                continue
            record_type = record.get("type")
            if record_type == "domain":
                recording.domains[int(record["id"])] = str(record["name"])
            elif record_type == "string":
                self.strings[int(record["id"])] = str(record["text"])
            elif record_type == "category":
                self.categories[(int(record["domain"]), int(record["id"]))] = str(record["name"])
            elif record_type == "thread_name":
                self.thread_names[int(record["tid"])] = str(record["name"])
            elif record_type == "thread":
                os_names[int(record["tid"])] = (
                    str(record.get("os_name", "")),
                    int(record.get("dropped", 0)),
                )
        self._finish(recording, os_names)
        return recording

    def _header(self, lines: Any) -> dict[str, Any]:
        first = next(iter(lines), "")
        header = self._parse(first, 1) if first else None
        if header is None or header.get("format") != "ncompass-nvtx":
            raise TraceError(f"{self.path}:1: not an ncompass NVTX recording")
        return header

    def _parse(self, line: str, number: int) -> dict[str, Any] | None:
        if not line.strip():
            return None
        try:
            record = json.loads(line)
        except ValueError as error:
            raise TraceError(
                f"{self.path}:{number}: corrupt NVTX recording line: {error}"
            ) from error
        if not isinstance(record, dict):
            raise TraceError(f"{self.path}:{number}: corrupt NVTX recording line")
        return record

    def _name(self, record: dict[str, Any]) -> str:
        if "s" in record:
            return self.strings.get(int(record["s"]), "")
        return str(record.get("m", ""))

    def _event(self, recording: NvtxRecording, kind: str, record: dict[str, Any]) -> None:
        tid, domain = int(record["tid"]), int(record.get("d", 0))
        if kind == "push":
            stack = self.stacks.setdefault((tid, domain), [])
            stack.append((len(stack), record))
        elif kind == "pop":
            open_pushes = self.stacks.get((tid, domain))
            if not open_pushes:
                recording.unmatched_pops += 1
                return
            depth, begin = open_pushes.pop()
            recording.ranges.append(
                self._range(recording, begin, "push_pop", int(record["t"]), tid, depth)
            )
        elif kind == "start":
            self.starts[int(record["id"])] = (tid, record)
        elif kind == "end":
            self.ends[int(record["id"])] = (int(record["t"]), tid)
        elif kind == "mark":
            recording.marks.append(
                NvtxMark(
                    name=self._name(record),
                    domain=recording.domains.get(domain, ""),
                    pid=recording.pid,
                    tid=tid,
                    time_ns=int(record["t"]),
                    color=record.get("c"),
                    category=record.get("cat"),
                    payload=record.get("p"),
                )
            )

    def _range(
        self,
        recording: NvtxRecording,
        begin: dict[str, Any],
        kind: RangeKind,
        end_ns: int | None,
        end_tid: int | None,
        depth: int = 0,
    ) -> NvtxRange:
        domain = int(begin.get("d", 0))
        category = begin.get("cat")
        return NvtxRange(
            name=self._name(begin),
            domain=recording.domains.get(domain, ""),
            kind=kind,
            pid=recording.pid,
            tid=int(begin["tid"]),
            start_ns=int(begin["t"]),
            end_ns=end_ns,
            end_tid=end_tid,
            depth=depth,
            color=begin.get("c"),
            category=category,
            category_name=None if category is None else self.categories.get((domain, category)),
            payload=begin.get("p"),
            range_id=begin.get("id"),
        )

    def _finish(self, recording: NvtxRecording, os_names: dict[int, tuple[str, int]]) -> None:
        for stack in self.stacks.values():  # pushes never popped before the process exited
            for depth, begin in stack:
                recording.ranges.append(
                    self._range(recording, begin, "push_pop", None, None, depth)
                )
        for range_id, (_, begin) in self.starts.items():
            end_ns, end_tid = self.ends.pop(range_id, (None, None))
            recording.ranges.append(self._range(recording, begin, "start_end", end_ns, end_tid))
        recording.unmatched_ends = len(self.ends)
        recording.ranges.sort(key=lambda r: (r.start_ns, r.depth))
        recording.marks.sort(key=lambda m: m.time_ns)
        for tid in sorted(set(os_names) | set(self.thread_names)):
            os_name, dropped = os_names.get(tid, ("", 0))
            recording.threads[tid] = NvtxThread(
                pid=recording.pid,
                tid=tid,
                os_name=os_name,
                name=self.thread_names.get(tid),
                dropped_events=dropped,
            )

"""One pass over a trace that keeps what the efficiency figures need: shaped ops, markers,
launches and GPU events, as per-thread columns.

The linking pass (``traces.link``) folds CPU operators into per-name totals and drops their
``args``; this pass reads ``Input Dims``/``Input type``/``Concrete Inputs`` with its own compact
decoder (``msgspec`` structs skipping every other key) and keeps only the ops that do work
(see :mod:`ncompass.analysis.op_work`), so its memory grows with those, not with the file.
"""

from __future__ import annotations

import gzip
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

import msgspec
import orjson

from ncompass.analysis.op_work import OpWork, counts_work, op_work
from ncompass.traces.events import GPU_CATEGORIES, MARKER_CATEGORY
from ncompass.traces.reader import TraceReader

_Value = int | float | str | bool | None


class _Args(msgspec.Struct, gc=False):
    # Raw: the shapes stay text until an op name that does work needs them, and the text is
    # the key of the per-signature cache (a trace repeats the same calls many times)
    dims: Any = msgspec.field(default=None, name="Input Dims")
    types: Any = msgspec.field(default=None, name="Input type")
    concrete: Any = msgspec.field(default=None, name="Concrete Inputs")
    correlation: Any = None


class _RawArgs(msgspec.Struct, gc=False):
    # msgspec takes Raw only on its own, not in a union: an empty Raw stands for "absent"
    dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
    types: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input type")
    concrete: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Concrete Inputs")
    correlation: Any = None


class _Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: _RawArgs | _Args | None = None


class _RawEvent(msgspec.Struct, gc=False):
    # typed: a batch with anything else here (a quoted number) is read by dicts instead
    ph: str | None = None
    cat: str | None = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: float | None = None
    dur: float | None = None
    args: _RawArgs | None = None


_DECODER = msgspec.json.Decoder(list[_RawEvent])


def _decode(text: bytes) -> list[Any] | None:
    try:
        return _DECODER.decode(text)
    except (msgspec.MsgspecError, ValueError, RecursionError):  # dicts read this batch
        return None


@dataclass
class OpCall:
    """One call of an op that does work, on one thread (times in µs, as in the trace)."""

    name: str
    start: float
    end: float
    work: OpWork
    counted: bool = False  # outermost work op on its thread: a marker's totals count it


@dataclass
class ThreadWork:
    """One CPU thread's work ops (by start), markers, and launches (by time)."""

    ops: list[OpCall] = field(default_factory=list)
    markers: list[tuple[str, float, float]] = field(default_factory=list)
    launches: list[tuple[float, int]] = field(default_factory=list)  # (ts, correlation)


_NO_CORRELATION = -1


@dataclass
class GpuCalls:
    """The GPU events, as columns (a kernel-heavy trace has millions): interned name, duration
    (µs) and the correlation of the launch (-1: none)."""

    names: list[str] = field(default_factory=list)
    name: array[int] = field(default_factory=lambda: array("q"))
    duration: array[float] = field(default_factory=lambda: array("d"))
    correlation: array[int] = field(default_factory=lambda: array("q"))
    _ids: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.duration)

    def __bool__(self) -> bool:
        return len(self.duration) > 0

    def add(self, name: str, duration: float, correlation: int | None) -> None:
        """Add one GPU event."""
        index = self._ids.get(name)
        if index is None:
            index = self._ids[name] = len(self.names)
            self.names.append(name)
        self.name.append(index)
        self.duration.append(duration)
        self.correlation.append(
            correlation
            if correlation is not None and -(2**63) <= correlation < 2**63
            else _NO_CORRELATION
        )


@dataclass
class WorkEvents:
    """What the efficiency pass read from one trace."""

    threads: dict[tuple[Any, Any], ThreadWork] = field(default_factory=dict)
    gpu: GpuCalls = field(default_factory=GpuCalls)
    shaped_ops: int = 0  # cpu_op events that carry "Input Dims" (0: recorded without shapes)
    metadata: dict[str, Any] = field(default_factory=dict)
    work_cache: dict[tuple[Any, ...], OpWork | None] = field(default_factory=dict)


_SHAPES_KEY = b'"Input Dims"'
_PROBE_CHUNK = 256 << 10  # small: it runs while the linked trace is still held


def has_shapes(path: str | Path) -> bool:
    """Whether the trace's text holds ``"Input Dims"`` anywhere: a byte search, so a trace
    recorded without shapes costs a read, not a decode (and none of the pass's memory)."""
    with open(path, "rb") as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
    opener: Any = gzip.open if compressed else open
    tail = b""
    try:
        with opener(path, "rb") as handle:
            while chunk := handle.read(_PROBE_CHUNK):
                if _SHAPES_KEY in tail + chunk[: len(_SHAPES_KEY)] or _SHAPES_KEY in chunk:
                    return True
                tail = chunk[-len(_SHAPES_KEY) :]
    except (OSError, EOFError, zlib.error):  # a damaged file: the reader says what is wrong
        return True
    return False


def read_work_events(path: str | Path) -> WorkEvents:
    """Read the shaped ops, markers, launches and GPU events of a trace in one pass (nothing
    but the probe when the trace has no shapes: ``shaped_ops`` is then 0)."""
    if not has_shapes(path):
        return WorkEvents()
    reader = TraceReader(path, progress=False)
    found = WorkEvents()
    for batch in reader.decoded_batches(_decode):
        for event in batch:
            if isinstance(event, dict):
                _add(found, _from_dict(event))
            else:
                _add(found, event)
    found.metadata = reader.metadata
    for thread in found.threads.values():
        thread.ops.sort(key=lambda call: (call.start, -call.end))
        thread.markers.sort(key=lambda marker: marker[1])
        thread.launches.sort()
        _mark_outermost(thread.ops)
    return found


def _from_dict(event: dict[str, Any]) -> _Event:
    args = event.get("args")
    return _Event(
        event.get("ph"),
        event.get("cat"),
        event.get("name"),
        event.get("pid"),
        event.get("tid"),
        event.get("ts"),
        event.get("dur"),
        _Args(
            args.get("Input Dims"),
            args.get("Input type"),
            args.get("Concrete Inputs"),
            args.get("correlation"),
        )
        if isinstance(args, dict)
        else None,
    )


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _add(found: WorkEvents, event: Any) -> None:  # a _RawEvent, or an _Event from a dict
    if event.ph != "X":
        return
    category = event.cat
    if category is None:
        return
    if type(event) is _RawEvent:
        start, duration = event.ts, event.dur or 0.0
    else:
        start, duration = _number(event.ts), _number(event.dur) or 0.0
        category = category.lower() if isinstance(category, str) else ""
    if start is None:
        return
    args = event.args
    if category == "cpu_op":
        if args is None or args.dims is None or (type(args) is _RawArgs and not args.dims):
            return
        found.shaped_ops += 1
        name = str(event.name)
        if not counts_work(name):
            return
        work = _cached_work(found, name, args)
        if work is not None:
            thread = _thread(found, (event.pid, event.tid))
            thread.ops.append(OpCall(name, start, start + duration, work))
        return
    if category.lower() in GPU_CATEGORIES:
        correlation = args.correlation if args is not None else None
        if not isinstance(correlation, int) or isinstance(correlation, bool):
            correlation = None
        found.gpu.add(str(event.name), duration, correlation)
    elif category == MARKER_CATEGORY:
        _thread(found, (event.pid, event.tid)).markers.append(
            (str(event.name), start, start + duration)
        )
    elif args is not None and type(args.correlation) is int:
        _thread(found, (event.pid, event.tid)).launches.append((start, args.correlation))


def _thread(found: WorkEvents, key: tuple[Any, Any]) -> ThreadWork:
    thread = found.threads.get(key)
    if thread is None:
        thread = found.threads[key] = ThreadWork()
    return thread


def _cached_work(found: WorkEvents, name: str, args: Any) -> OpWork | None:
    """The op's work, computed once per distinct (name, shapes, types, scalars)."""
    raw = isinstance(args, _RawArgs)
    parts = (args.dims, args.types, args.concrete)
    key = (name, *(bytes(p) if raw else orjson.dumps(p) for p in parts))
    if key in found.work_cache:
        return found.work_cache[key]
    if raw:
        dims, types, concrete = (msgspec.json.decode(p) if p else None for p in parts)
    else:
        dims, types, concrete = parts
    work = op_work(name, dims, types, concrete)
    found.work_cache[key] = work
    return work


def _mark_outermost(ops: list[OpCall]) -> None:
    """Count each op whose work no enclosing work op already holds (aten::linear, not its
    aten::addmm): ops are sorted by start, and enclosing ones end last."""
    open_until = float("-inf")
    for call in ops:
        if call.start >= open_until:
            call.counted = True
            open_until = call.end


class RangeSums:
    """Sums of per-item values over time ranges on one thread (prefix sums, bisect)."""

    def __init__(self, times: list[float], values: Iterable[float]) -> None:
        self._times = times
        self._sums = [0.0, *accumulate(values)]

    def between(self, start: float, end: float) -> float:
        """The sum over the items whose time is in [start, end]."""
        low = bisect_left(self._times, start)
        high = bisect_right(self._times, end)
        return self._sums[high] - self._sums[low] if high > low else 0.0


__all__ = [
    "GpuCalls",
    "OpCall",
    "RangeSums",
    "ThreadWork",
    "WorkEvents",
    "has_shapes",
    "read_work_events",
]

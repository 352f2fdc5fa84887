"""What one streaming pass over a trace keeps for analysis, and the fold that keeps it.

What is kept grows with the markers, the CPU-side launches and the GPU events (stored as compact
columns), not with the file: CPU operators are folded into per-name aggregates on the fly. The
common events are folded in C when the extension ``_fold`` is built (``_fold.c``), the others
(and all of them without it) by :class:`Collector` in Python, the reference.
"""

from __future__ import annotations

import json
import math
import operator
import re
import warnings
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

from ncompass.traces._decode import as_event, link_args_type, link_event_type
from ncompass.traces.events import (
    GPU_CATEGORIES,
    MARKER_CATEGORY,
    OVERLAP_OF_KEY,
    Event,
    KernelClass,
    classify_gpu_event,
)
from ncompass.traces.identity import TraceIdentity, trace_identity
from ncompass.traces.reader import EventsLeftOutWarning, TraceValueError, ordinal
from ncompass.warning_location import stacklevel_outside

try:
    from ncompass.traces import _fold
except ImportError:  # built without a C compiler: the Python fold below does the same
    _fold = None  # type: ignore[assignment]

NO_LINK = -1
"""Index stored where a GPU event has no launch, or a launch no marker."""
INDEX = "i"
"""The typecode of the index columns (names, threads, launches, markers): 4 bytes an item, 24
bytes a kernel and its launch less than 8-byte items (the C fold and sweeps read them so)."""

# Categories of X events on the GPU side that are not GPU events by the contract and never launches.
_GPU_SIDE_CATEGORIES = frozenset({"gpu_user_annotation", "cuda_sync"})
_CPU_OP_CATEGORY = "cpu_op"
# Categories (as profilers spell them) of most CPU-side events, folded in without a call.
_INLINE_CATEGORIES = frozenset({_CPU_OP_CATEGORY, "cuda_runtime", "cuda_driver"})
# Phases whose events are read beyond being counted (every other non-X event only counts).
_PAIRED_OR_METADATA_PHASES = frozenset({"B", "E", "M"})
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
# torch.compile times its own phases with ranges named "<phase>_data: compile_id=0/0" (or
# "..._data: fn_name=..., compile_id=0/0"): its setup work, kept apart from the markers.
_COMPILE_PHASE_TAG = "compile_id="
_COMPILE_PHASE = re.compile(r"_data: (?:[^:]*, )?compile_id=\S+$")
KERNEL_CLASSES = (KernelClass.COMPUTATION, KernelClass.COMMUNICATION, KernelClass.MEMORY)
"""Kernel classes in the order of their codes in :attr:`GpuEvents.kernel_class`."""
_KERNEL_CLASS_CODES = {kernel_class: code for code, kernel_class in enumerate(KERNEL_CLASSES)}
_COLUMN_LIMIT = 2**63
"""A correlation id or byte count from here on does not fit its 64-bit column: it is refused,
written as an integer or not (a JSON decoder reads an integer beyond 64 bits as a float)."""
TIME_LIMIT_US = 2.0**53
"""The largest ``ts`` or ``dur`` (in magnitude) a trace time can be: 2^53 µs, 285 years. Past it a
float no longer holds whole microseconds, and no clock a profiler reads gets there (epoch
microseconds are 1.8e15 in 2026); a 1e300 duration is a damaged value, refused like NaN."""


class _UnusableTime(ValueError):
    """A ``ts`` or ``dur`` that is no time: not a number (nor a quoted one), NaN, infinite, or
    beyond :data:`TIME_LIMIT_US`."""


_VALUE_ERRORS = (TypeError, OverflowError, _UnusableTime)
"""What folding a value of the wrong type or range raises (a list where a pid belongs cannot be
a key; an integer too large for a column, or for a float; a time that is NaN or not a number):
made a TraceValueError that names the event. The C fold leaves every such value (and every
negative duration) to the Python fold, so this is the one place."""


def _duration_value(value: object) -> float:
    """A ``dur`` as :func:`_time_value` reads it, an int or a float kept as the trace wrote it
    (an operator's maximum keeps its type)."""
    if (type(value) is int or type(value) is float) and -TIME_LIMIT_US <= value <= TIME_LIMIT_US:
        return value  # type: ignore[return-value]
    return _time_value(value)


def _time_value(value: object) -> float:
    """A ``ts`` or ``dur`` as a float in microseconds: a number or a quoted one (0.0 when the
    field is missing or null, as before).

    Raises:
        _UnusableTime: Not a number, NaN, infinite (1e309 reads as infinite) or beyond
            :data:`TIME_LIMIT_US`.
        OverflowError: An integer too large for a float.
    """
    if value is None:
        return 0.0
    if type(value) is int or type(value) is float:
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise _UnusableTime(value) from None
    else:
        raise _UnusableTime(value)
    if not -TIME_LIMIT_US <= number <= TIME_LIMIT_US:  # NaN fails this too
        raise _UnusableTime(value)
    return number


def encloses(outer_start: float, outer_end: float, start: float, end: float) -> bool:
    """Whether ``[start, end]`` lies inside ``[outer_start, outer_end]``.

    Ends are computed as ``ts + dur`` in floating point, which rounds: at epoch-microsecond
    magnitudes (1.7e15) one unit in the last place is 0.25 µs. A few units of slack keep a range
    that ends exactly with its parent nested in it.
    """
    slack = 4 * math.ulp(outer_end)
    return outer_start - slack <= start and end <= outer_end + slack


def marker_group(name: str) -> str:
    """The name markers are reported under: every ``ProfilerStep#N`` is one group."""
    return "ProfilerStep#*" if _PROFILER_STEP.match(name) else name


@dataclass(slots=True)
class Marker:
    """One marker range on a CPU thread, with its links filled in by :func:`link_trace`."""

    name: str
    thread: int  # index into LinkedTrace.threads
    start: float
    duration: float  # inclusive CPU time in µs, as recorded (not end - start, which rounds)
    parent: int = NO_LINK  # index of the innermost enclosing marker on the same thread
    nested_us: float = 0.0  # time covered by markers directly nested in this one

    @property
    def end(self) -> float:
        """When the range ends, in microseconds."""
        return self.start + self.duration


@dataclass
class OperatorTotals:
    """Calls and total (inclusive) time of one CPU operator name, and each call's duration."""

    calls: int = 0
    total_us: float = 0.0
    max_us: float = 0.0
    # per call, in file order: 8 bytes a call, the samples `ncompass compare` tests changes on
    durations: array[float] = field(default_factory=lambda: array("d"))


@dataclass
class LaunchCalls:
    """CPU-side events carrying ``args.correlation`` (runtime/driver calls), as columns."""

    name: array[int] = field(default_factory=lambda: array(INDEX))  # index into LinkedTrace.names
    thread: array[int] = field(default_factory=lambda: array(INDEX))
    start: array[float] = field(default_factory=lambda: array("d"))
    duration: array[float] = field(default_factory=lambda: array("d"))
    correlation: array[int] = field(default_factory=lambda: array("q"))
    marker: array[int] = field(default_factory=lambda: array(INDEX))  # filled by linking
    # Launches also inside markers that only partly overlap their innermost one (start/end
    # ranges interleave): launch index -> those markers, outside the innermost one's parents.
    also_inside: dict[int, list[int]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class GpuEvents:
    """GPU events (kernels, memcpys, memsets) as columns."""

    name: array[int] = field(default_factory=lambda: array(INDEX))
    kernel_class: array[int] = field(default_factory=lambda: array("b"))  # see KERNEL_CLASSES
    stream: array[int] = field(default_factory=lambda: array(INDEX))  # into LinkedTrace.threads
    start: array[float] = field(default_factory=lambda: array("d"))
    duration: array[float] = field(default_factory=lambda: array("d"))
    correlation: array[int] = field(default_factory=lambda: array("q"))
    launch: array[int] = field(default_factory=lambda: array(INDEX))  # filled by linking
    bytes: array[int] = field(default_factory=lambda: array("q"))  # memcpy/memset size, or 0

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class LinkedTrace:
    """What one trace file holds that analysis needs, with GPU events linked to launches and
    launches to markers.

    Attributes:
        path: The trace file.
        metadata: Its top-level keys other than ``traceEvents``.
        names: Interned event names; the columns store indices into it.
        threads: ``(pid, tid)`` of every thread and GPU stream seen; columns store indices.
        thread_names: ``(pid, tid)`` -> name, from ``thread_name`` metadata events.
        markers: Marker ranges in file order.
        launches: CPU launches (events with ``args.correlation``).
        gpu: GPU events.
        cpu_operators: Per-name totals of ``cpu_op`` events.
        compile_phases: Per-name totals of the ranges ``torch.compile`` records for its own
            phases (``dynamo_data: compile_id=0/0``, ...): setup work, not markers.
        origin_us: The timestamp every time in this object is relative to (the first event's
            ``ts``): subtracting it before adding durations keeps sub-microsecond precision
            that ``ts + dur`` at epoch magnitudes would round away.
        cpu_start, cpu_end: First start and last end of CPU-side complete events.
        event_counts: Number of events per phase (``X``, ``B``, ``i``, ``s``, ``M``, ``C``, ...).
    """

    path: Path
    metadata: dict[str, Any] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    threads: list[tuple[Any, Any]] = field(default_factory=list)
    thread_names: dict[tuple[Any, Any], str] = field(default_factory=dict)
    markers: list[Marker] = field(default_factory=list)
    launches: LaunchCalls = field(default_factory=LaunchCalls)
    gpu: GpuEvents = field(default_factory=GpuEvents)
    cpu_operators: dict[str, OperatorTotals] = field(default_factory=dict)
    compile_phases: dict[str, OperatorTotals] = field(default_factory=dict)
    origin_us: float = 0.0
    cpu_start: float = float("inf")
    cpu_end: float = float("-inf")
    event_counts: dict[str, int] = field(default_factory=dict)

    @property
    def identity(self) -> TraceIdentity:
        """Who recorded the trace: its rank, process and role (see :func:`trace_identity`)."""
        return trace_identity(self.metadata)

    @property
    def rank(self) -> int | None:
        """The rank the trace names (``ncompass_process.rank``, else ``distributedInfo.rank``)."""
        return self.identity.rank

    def marker_of_gpu_event(self, index: int) -> int:
        """Index of the marker whose range launched GPU event ``index``, or :data:`NO_LINK`."""
        launch = self.gpu.launch[index]
        return NO_LINK if launch == NO_LINK else self.launches.marker[launch]


def fold_path() -> str:
    """Which fold :func:`link_trace` uses: ``"C"`` (the extension), ``"Python, structs"``
    (msgspec without the extension) or ``"Python, dicts"`` (neither)."""
    if link_event_type is None:
        return "Python, dicts"
    return "Python, structs" if _fold is None else "C"


class Collector:
    """Folds events into a LinkedTrace; pairs B/E events into complete ranges."""

    def __init__(
        self, trace: LinkedTrace, origin: float | None = None, *, part: bool = False
    ) -> None:
        """Start an empty collection.

        Args:
            trace: What to fold into.
            origin: The trace's origin when already known (a part of a split trace).
            part: Fold one part of a split trace (:meth:`part`, merged with :meth:`absorb`).
        """
        self.trace = trace
        self._is_part = part
        self._name_index: dict[str, int] = {}
        # name index -> kernel class code + 1 (0: not classified yet); a byte a name, where a
        # dict cost ~80 bytes a name in traces whose kernel names are all distinct
        self._class_of_name = bytearray()
        self._thread_index: dict[tuple[Any, Any], int] = {}
        self._open_ranges: dict[tuple[Any, Any], list[Event]] = defaultdict(list)
        self._counts: dict[str, int] = defaultdict(int)
        self._last_timestamp = float("-inf")
        self._origin: float | None = origin
        if origin is not None:
            trace.origin_us = origin
        self._overlap_of: dict[tuple[Any, Any], tuple[Any, Any]] = {}
        self._range_begin: Event | None = None  # the begin event of the range ended last
        self._left_out = 0  # events with a negative duration (old Kineto wrote some)
        self._first_left_out = ""  # the first of them, as the warning names it
        self._folder: Any = None
        if _fold is not None and link_event_type is not None:
            self._folder = _fold.Folder(
                self,
                trace,
                link_event_type,
                link_args_type,
                self._add_in_python,
                self._new_operator,
                self._kernel_class_of,
            )

    def add(self, events: list[Any]) -> None:
        """Fold in events: dicts, or the compact structs of :meth:`TraceReader.link_batches`.

        Raises:
            TraceValueError: An event holds a value linking cannot use (a pid that is a list, a
                correlation id beyond 64 bits, ...): it names the event and the value.
        """
        if self._folder is not None:
            self._folder.fold(events)  # the common events in C, the others in the loop below
        else:
            self._add_in_python(events)

    def _add_in_python(self, events: Iterable[Any]) -> None:
        counts = self._counts
        complete = self._complete
        compact = link_event_type
        trace = self.trace
        operators = trace.cpu_operators
        launches = trace.launches
        origin = self._origin
        try:
            for event in events:
                length: Any
                # The common cases inline: this loop runs once per event of the file.
                if type(event) is compact:
                    phase = event.ph
                    if phase == "X":
                        counts["X"] += 1
                        length = event.dur
                        timestamp = event.ts
                        category = event.cat
                        # Most events are operator calls and runtime calls on CPU threads: what
                        # _complete does for them, without the call.
                        if (
                            type(category) is str
                            and category in _INLINE_CATEGORIES
                            and (type(length) is float or type(length) is int)
                            and (type(timestamp) is float or type(timestamp) is int)
                            and 0 <= length <= TIME_LIMIT_US
                            and -TIME_LIMIT_US <= timestamp <= TIME_LIMIT_US
                            and origin is not None
                            and type(name := event.name) is str
                        ):
                            start = timestamp - origin
                            end = start + length
                            if end > self._last_timestamp:
                                self._last_timestamp = end
                            if start < trace.cpu_start:
                                trace.cpu_start = start
                            if end > trace.cpu_end:
                                trace.cpu_end = end
                            if category == _CPU_OP_CATEGORY:
                                totals = operators.get(name)
                                if totals is None:
                                    totals = self._new_operator(name)
                                totals.calls += 1
                                totals.total_us += length
                                totals.durations.append(length)
                                if length > totals.max_us:
                                    totals.max_us = length
                                continue
                            args = event.args
                            correlation = args.correlation if args is not None else None
                            if type(correlation) is int:
                                launches.name.append(self._name_id(name))
                                launches.thread.append(self._thread_of((event.pid, event.tid)))
                                launches.start.append(start)
                                launches.duration.append(length)
                                launches.correlation.append(correlation)  # raises past 64 bits
                            elif type(correlation) is float and correlation >= _COLUMN_LIMIT:
                                raise OverflowError("a correlation id beyond 64 bits")
                            continue
                        length = _duration_value(length)
                        if length < 0:
                            self._leave_out(event, sum(counts.values()), timestamp)
                            continue
                        args = event.args
                        complete(
                            timestamp, category, event.name, event.pid, event.tid, args, length
                        )
                        origin = self._origin
                        continue
                    if phase not in _PAIRED_OR_METADATA_PHASES:
                        counts[phase if isinstance(phase, str) else "?"] += 1
                        continue
                    event = as_event(event)
                phase = event.get("ph")
                counts[phase if isinstance(phase, str) else "?"] += 1
                if phase == "X":
                    length = _duration_value(event.get("dur"))
                    if length < 0:
                        self._leave_out(event, sum(counts.values()), event.get("ts"))
                    else:
                        self._complete_event(event, length)
                elif phase == "B":
                    self._open_ranges[(event.get("pid"), event.get("tid"))].append(event)
                elif phase == "E":
                    self._close_range(event)
                elif phase == "M":
                    self._metadata_event(event)
                origin = self._origin
        except _VALUE_ERRORS as error:
            # a value of the wrong type or range: name the event (counted as it was read)
            raise self._refusal(event, sum(counts.values()), error) from error

    def _leave_out(self, event: Any, position: int, timestamp: object) -> None:
        """Leave out an event whose duration is negative (its ``timestamp``, when it has one of
        its own, must still be a time); :meth:`finish` warns once, naming the first."""
        event = event if type(event) is dict else as_event(event)
        _time_value(timestamp)  # a ts that is no time is refused, as in any other event
        self._left_out += 1
        if self._left_out == 1:
            ends = "ends before the range it ends began" if event.get("ph") == "E" else ""
            what = ends or f"has a dur of {_shown(event.get('dur'))}"
            self._first_left_out = f"the {ordinal(position)} event ({_label(event)}) {what}"

    @property
    def left_out(self) -> int:
        """How many events were left out for a negative duration."""
        return self._left_out

    @property
    def origin(self) -> float | None:
        """The timestamp times are relative to, once the first timed event set it."""
        return self._origin

    def part(self) -> FoldedPart:
        """What this collector folded of one part of a split trace, to send to the merging one."""
        return FoldedPart(
            self.trace,
            dict(self._counts),
            self._last_timestamp,
            dict(self._overlap_of),
            {track: stack for track, stack in self._open_ranges.items() if stack},
        )

    def absorb(self, part: FoldedPart) -> None:
        """Fold in the part of the trace that follows what was folded so far, exactly as if its
        events had been added here (``finish`` afterwards, as usual).

        Raises:
            ValueError: A begin/end pair spans the cut before ``part`` (the caller folds the
                whole trace in one process instead).
        """
        if any(self._open_ranges.values()):
            # where the ends after the cut would go (and in which order the ranges complete)
            # is only known by folding both sides in one pass
            raise ValueError("a begin/end pair spans the cut")
        folded = part.trace
        trace = self.trace
        names = [self._name_id(name) for name in folded.names]
        threads = [self._thread_of(thread) for thread in folded.threads]
        trace.thread_names.update(folded.thread_names)
        for marker in folded.markers:
            marker.thread = threads[marker.thread]
            trace.markers.append(marker)
        launches, gpu = trace.launches, trace.gpu
        launches.name.extend(array(INDEX, [names[name] for name in folded.launches.name]))
        launches.thread.extend(array(INDEX, [threads[thread] for thread in folded.launches.thread]))
        launches.start.extend(folded.launches.start)
        launches.duration.extend(folded.launches.duration)
        launches.correlation.extend(folded.launches.correlation)
        gpu.name.extend(array(INDEX, [names[name] for name in folded.gpu.name]))
        gpu.kernel_class.extend(folded.gpu.kernel_class)
        gpu.stream.extend(array(INDEX, [threads[stream] for stream in folded.gpu.stream]))
        for column in ("start", "duration", "correlation", "bytes"):
            getattr(gpu, column).extend(getattr(folded.gpu, column))
        _absorb_totals(trace.cpu_operators, folded.cpu_operators, self._intern)
        _absorb_totals(trace.compile_phases, folded.compile_phases, self._intern)
        trace.cpu_start = min(trace.cpu_start, folded.cpu_start)
        trace.cpu_end = max(trace.cpu_end, folded.cpu_end)
        for phase, count in part.counts.items():
            self._counts[phase] += count
        self._last_timestamp = max(self._last_timestamp, part.last_timestamp)
        self._overlap_of.update(part.overlap_of)
        self._open_ranges.update(part.open_ranges)

    def finish(self) -> LinkedTrace:
        # Ranges never closed run to the end of the trace, as trace viewers draw them.
        for stack in self._open_ranges.values():
            for event in stack:
                try:
                    start = self._relative(event.get("ts"))
                    self._complete_event(event, max(0.0, self._last_timestamp - start))
                except _VALUE_ERRORS as error:
                    raise self._refusal(event, None, error) from error
        self.trace.event_counts = {str(phase): count for phase, count in self._counts.items()}
        if self._left_out:
            warnings.warn(
                EventsLeftOutWarning(self.trace.path, self._left_out, self._first_left_out),
                stacklevel=stacklevel_outside("ncompass"),  # the user's line that read the trace
            )
        for phase in self.trace.compile_phases.values():
            del phase.durations[:]  # kept only to merge the parts of a split trace
        self._fold_overlap_tracks()
        self._release()
        return self.trace

    def _release(self) -> None:
        """Free what only folding needed before linking allocates its own: the interning tables
        (a dict entry and an int a distinct name, 16 MB for 120k kernel names) and the C folder,
        whose reference back to this collector would otherwise keep them until a garbage
        collection."""
        self._folder = None
        self._name_index = {}
        self._class_of_name = bytearray()

    def _fold_overlap_tracks(self) -> None:
        """Put the slices of overlap tracks back on the thread (or stream) they belong to."""
        moved = {
            lane: self._thread_of(own)
            for track, own in self._overlap_of.items()
            if (lane := self._thread_index.get(track)) is not None
        }
        if not moved:
            return
        trace = self.trace
        for marker in trace.markers:
            marker.thread = moved.get(marker.thread, marker.thread)
        for column in (trace.launches.thread, trace.gpu.stream):
            column[:] = array(INDEX, [moved.get(thread, thread) for thread in column])

    def _close_range(self, end_event: Event) -> None:
        stack = self._open_ranges.get((end_event.get("pid"), end_event.get("tid")))
        if not stack:
            return  # an E without its B (cut off at the trace start): nothing to measure
        begin = stack.pop()
        self._range_begin = begin  # what a refusal names when completing the range fails
        start = self._relative(begin.get("ts"))
        end_args = end_event.get("args")
        if isinstance(end_args, dict) and end_args:
            begin_args = begin.get("args")
            begin_args = begin_args if isinstance(begin_args, dict) else {}
            begin = {**begin, "args": {**begin_args, **end_args}}
        duration = self._relative(end_event.get("ts")) - start
        if duration < 0:  # it ends before it begins
            self._leave_out(end_event, sum(self._counts.values()), None)
            return
        self._complete_event(begin, duration)

    def _complete_event(self, event: Event, duration: float) -> None:
        args = event.get("args")
        self._complete(
            event.get("ts"),
            event.get("cat"),
            event.get("name"),
            event.get("pid"),
            event.get("tid"),
            args if isinstance(args, dict) else None,
            duration,
        )

    def _complete(
        self,
        timestamp: Any,
        category: Any,
        name: Any,
        pid: Any,
        tid: Any,
        args: Any,
        duration: float,
    ) -> None:
        """Fold in one complete range; ``args`` is a dict, a ``LinkArgs`` struct or None."""
        trace = self.trace
        if (
            (type(timestamp) is float or type(timestamp) is int)
            and self._origin is not None
            and -TIME_LIMIT_US <= timestamp <= TIME_LIMIT_US
        ):
            start = timestamp - self._origin
        else:
            start = self._relative(timestamp)
        end = start + duration
        if end > self._last_timestamp:
            self._last_timestamp = end
        category = category.lower() if isinstance(category, str) else ""
        if not isinstance(name, str):
            if isinstance(name, (list, dict)):
                raise TypeError("a name that is a list or an object")
            name = str(name)  # a number, true or null, as it reads
        if category in GPU_CATEGORIES:
            self._gpu_event(args, name, self._thread_of((pid, tid)), start, duration)
            return
        if category in _GPU_SIDE_CATEGORIES:
            return
        if start < trace.cpu_start:
            trace.cpu_start = start
        if end > trace.cpu_end:
            trace.cpu_end = end
        if category == MARKER_CATEGORY:
            if _COMPILE_PHASE_TAG in name and _COMPILE_PHASE.search(name):
                phase = trace.compile_phases.get(name)
                if phase is None:
                    phase = trace.compile_phases[self._intern(name)] = OperatorTotals()
                phase.calls += 1
                phase.total_us += duration
                if self._is_part:  # for absorb() to add them up in file order
                    phase.durations.append(duration)
                return
            thread = self._thread_of((pid, tid))
            trace.markers.append(Marker(self._intern(name), thread, start, duration))
            return
        if category == _CPU_OP_CATEGORY:
            totals = trace.cpu_operators.get(name)
            if totals is None:
                totals = self._new_operator(name)
            totals.calls += 1
            totals.total_us += duration
            totals.durations.append(duration)
            if duration > totals.max_us:
                totals.max_us = duration
            return
        correlation = args.get("correlation") if args is not None else None
        if isinstance(correlation, int) and not isinstance(correlation, bool):
            launches = trace.launches
            launches.name.append(self._name_id(name))
            launches.thread.append(self._thread_of((pid, tid)))
            launches.start.append(start)
            launches.duration.append(duration)
            launches.correlation.append(correlation)  # raises past 64 bits
        elif type(correlation) is float and correlation >= _COLUMN_LIMIT:
            raise OverflowError("a correlation id beyond 64 bits")

    def _refusal(self, event: Any, position: int | None, error: Exception) -> TraceValueError:
        """The error naming ``event`` (the ``position``-th of the file; None: a range never
        ended) and the value of it that folding failed on with ``error``."""
        event = event if type(event) is dict else as_event(event)
        label = _label(event)
        if position is None:
            label = f"the range begun by the event ({label}) and never ended"
        detail = _what_is_wrong(event)
        begin = self._range_begin
        if detail is None and event.get("ph") == "E" and begin is not None:
            begun = _what_is_wrong(begin)
            if begun is not None:
                detail = f"ends a range begun by the event ({_label(begin)}), which {begun}"
        if detail is None:  # none of the known cases: say what failed
            detail = f"holds a value linking cannot use ({type(error).__name__}: {error})"
        return TraceValueError(self.trace.path, position, label, detail)

    def _relative(self, timestamp: object) -> float:
        value = _time_value(timestamp)
        if self._origin is None:
            self._origin = self.trace.origin_us = value
        return value - self._origin

    def _gpu_event(self, args: Any, name: str, stream: int, start: float, duration: float) -> None:
        gpu = self.trace.gpu
        name_id = self._name_id(name)
        correlation = args.get("correlation") if args is not None else None
        size = args.get("bytes") if args is not None else None
        gpu.name.append(name_id)
        gpu.kernel_class.append(self._kernel_class_of(name_id, name))
        gpu.stream.append(stream)
        gpu.start.append(start)
        gpu.duration.append(duration)
        # an int past 64 bits raises OverflowError; a float that large is refused as well
        if isinstance(correlation, int) and correlation >= 0:
            gpu.correlation.append(correlation)
        elif type(correlation) is float and correlation >= _COLUMN_LIMIT:
            raise OverflowError("a correlation id beyond 64 bits")
        else:
            gpu.correlation.append(NO_LINK)
        if isinstance(size, int) and size >= 0:
            gpu.bytes.append(size)
        elif type(size) is float and size >= _COLUMN_LIMIT:
            raise OverflowError("a byte count beyond 64 bits")
        else:
            gpu.bytes.append(0)

    def _kernel_class_of(self, name_id: int, name: str) -> int:
        known = self._class_of_name
        if name_id < len(known) and known[name_id]:
            return known[name_id] - 1
        kernel_class = _KERNEL_CLASS_CODES[classify_gpu_event(name)]
        if name_id >= len(known):
            known.extend(bytes(name_id + 1 - len(known)))
        known[name_id] = kernel_class + 1
        return kernel_class

    def _new_operator(self, name: str) -> OperatorTotals:
        totals = self.trace.cpu_operators[self._intern(name)] = OperatorTotals()
        return totals

    def _metadata_event(self, event: Event) -> None:
        if event.get("name") == "thread_name":
            args = event.get("args")
            if not isinstance(args, dict):
                return
            track = (event.get("pid"), event.get("tid"))
            label = args.get("name")
            if isinstance(label, str):
                self.trace.thread_names[track] = label
            own = args.get(OVERLAP_OF_KEY)
            if own is not None and own != track[1]:
                hash(own)  # a list or an object raises TypeError now, not when finishing
                self._overlap_of[track] = (track[0], own)

    def _intern(self, name: str) -> str:
        return self.trace.names[self._name_id(name)]

    def _name_id(self, name: str) -> int:
        if self._folder is not None:  # its table, 4-8 bytes a name, holds every name
            return int(self._folder.name_id(name))
        index = self._name_index.get(name)
        if index is None:
            index = self._name_index[name] = len(self.trace.names)
            self.trace.names.append(name)
        return index

    def _thread_of(self, key: tuple[Any, Any]) -> int:
        index = self._thread_index.get(key)
        if index is None:
            index = self._thread_index[key] = len(self.trace.threads)
            self.trace.threads.append(key)
        return index


@dataclass
class FoldedPart:
    """One part of a split trace, folded (times relative to the whole trace's origin)."""

    trace: LinkedTrace
    counts: dict[str, int]
    last_timestamp: float
    overlap_of: dict[tuple[Any, Any], tuple[Any, Any]]
    open_ranges: dict[tuple[Any, Any], list[Event]]


def _absorb_totals(
    totals: dict[str, OperatorTotals],
    later: dict[str, OperatorTotals],
    intern: Callable[[str], str],
) -> None:
    """Add per-name totals of later events, summing durations in file order as one pass does."""
    for name, more in later.items():
        kept = totals.get(name)
        if kept is None:
            totals[intern(name)] = more
            continue
        kept.calls += more.calls
        # ((a + b) + c) + d, not (a + b) + (c + d): floating-point sums depend on the order
        kept.total_us = reduce(operator.add, more.durations, kept.total_us)
        if more.max_us > kept.max_us:
            kept.max_us = more.max_us
        kept.durations.extend(more.durations)


def _what_is_wrong(event: Event) -> str | None:
    """What about ``event`` linking cannot use, as the end of a sentence about the event; None
    when it is none of the known cases."""
    for key in ("pid", "tid"):
        value = event.get(key)
        if isinstance(value, (list, dict)):
            return f"has a {key} that is {_kind_of(value)}, not a number or a string"
    name = event.get("name")
    if isinstance(name, (list, dict)):
        return f"has a name that is {_kind_of(name)}, not a string"
    for key in ("ts", "dur"):
        value = event.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not _fits_a_float(value):
            return f"has a {key} of {_shown(value)}, too large for a time in microseconds"
        try:
            _time_value(value)
        except _UnusableTime:
            return f"has a {key} of {_shown(value)}, which is not {_no_time(value)}"
        except OverflowError:
            pass
    args = event.get("args")
    if not isinstance(args, dict):
        return None
    for key in ("correlation", "bytes"):
        value = args.get(key)
        if isinstance(value, (int, float)) and value >= _COLUMN_LIMIT:
            return f"has args.{key} {_shown(value)}, which does not fit in 64 bits"
    own = args.get(OVERLAP_OF_KEY)
    if isinstance(own, (list, dict)):
        return f"has args.{OVERLAP_OF_KEY} that is {_kind_of(own)}, not a thread id"
    return None


def _no_time(value: object) -> str:
    """What a ``ts`` or ``dur`` that :func:`_time_value` refuses is not."""
    if isinstance(value, bool):
        return "a number"
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "a number"
    if math.isfinite(number):
        return "a time in microseconds: beyond ±2^53 µs (285 years), no clock gets there"
    return "a finite number"


def _label(event: Event) -> str:
    """The event as a refusal names it: ``ph "X", name "cudaLaunchKernel"``."""
    parts = [
        f"{key} {_shown(value)}"
        for key in ("ph", "name")
        if isinstance(value := event.get(key), str)
    ]
    return ", ".join(parts) or "no ph, no name"


def _kind_of(value: object) -> str:
    return "a list" if isinstance(value, list) else "an object"


def _fits_a_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _shown(value: object) -> str:
    """A value as a refusal shows it (strings quoted as in JSON), long ones shortened."""
    shown_as_json = isinstance(value, (str, float, bool)) or value is None  # NaN, true, null
    text = json.dumps(value, ensure_ascii=False) if shown_as_json else repr(value)
    if len(text) <= 40:
        return text
    unit = "characters" if isinstance(value, str) else "digits" if isinstance(value, int) else ""
    return f"{text[:24]}... ({len(text)} {unit})" if unit else f"{text[:24]}..."

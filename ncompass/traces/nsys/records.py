"""The rows the converter reads from an export, as small typed records.

Times are integer nanoseconds on the report's clock. CPU-side records carry ``global_tid`` (the
serialized thread id, see :mod:`ncompass.traces.nsys.schema`) and sort by
:func:`thread_order` so several queries can be merged into one time-ordered stream per thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

NvtxRangeKind = Literal["push_pop", "start_end"]
GpuOpKind = Literal["kernel", "memcpy", "memset"]

# Among CPU records that start together, ranges come before what they may enclose.
_RANGE, _CALL, _OS_CALL, _MARK = 0, 1, 2, 3


@dataclass(slots=True)
class GpuOpLaunch:
    """A GPU operation as seen from the runtime call that launched it.

    Attributes:
        kind: Which activity table it is in.
        row: Its ``rowid`` there (``(kind, row)`` names it).
        start, end: When it ran on the GPU.
        process: :func:`~ncompass.traces.nsys.schema.process_key` of its process.
        device, context, stream: Where it ran.
    """

    kind: GpuOpKind
    row: int
    start: int
    end: int
    process: int
    device: int
    context: int
    stream: int


@dataclass(slots=True)
class RuntimeCall:
    """A CUDA runtime or driver API call, with the GPU operations it launched."""

    row: int
    global_tid: int
    start: int
    end: int
    correlation: int | None
    name: str
    return_value: int | None
    ops: list[GpuOpLaunch] = field(default_factory=list)

    @property
    def order(self) -> tuple[int, int, int, int]:
        """Position in a thread's time-ordered stream (see :func:`thread_order`)."""
        return (self.global_tid, self.start, -self.end, _CALL)


@dataclass(slots=True)
class NvtxAttributes:
    """What an NVTX event carries besides its name and times."""

    domain: str
    category: int | None = None
    category_name: str | None = None
    color: int | None = None
    payload: int | float | str | None = None


@dataclass(slots=True)
class NvtxRange:
    """An NVTX range.

    Attributes:
        row: ``rowid`` in ``NVTX_EVENTS``.
        global_tid: The thread that began it.
        end_global_tid: The thread that ended it, when that is another thread.
        start, end: Its span; ``end`` is the end of the report when it never ended.
        unclosed: Whether it was still open when the report ended.
        kind: Push/pop (nested per thread) or start/end (may overlap).
    """

    row: int
    global_tid: int
    end_global_tid: int | None
    start: int
    end: int
    unclosed: bool
    kind: NvtxRangeKind
    name: str
    attributes: NvtxAttributes

    @property
    def order(self) -> tuple[int, int, int, int]:
        """Position in a thread's time-ordered stream (see :func:`thread_order`)."""
        return (self.global_tid, self.start, -self.end, _RANGE)


@dataclass(slots=True)
class NvtxMark:
    """An instantaneous NVTX marker."""

    row: int
    global_tid: int
    start: int
    name: str
    attributes: NvtxAttributes

    @property
    def end(self) -> int:
        """A mark ends where it starts."""
        return self.start

    @property
    def order(self) -> tuple[int, int, int, int]:
        """Position in a thread's time-ordered stream (see :func:`thread_order`)."""
        return (self.global_tid, self.start, -self.start, _MARK)


@dataclass(slots=True)
class OsCall:
    """An OS runtime library call (``pthread_mutex_lock``, ``ioctl``, ``read``, ...)."""

    global_tid: int
    start: int
    end: int
    name: str
    return_value: int | None
    nesting: int | None

    @property
    def order(self) -> tuple[int, int, int, int]:
        """Position in a thread's time-ordered stream (see :func:`thread_order`)."""
        return (self.global_tid, self.start, -self.end, _OS_CALL)


CpuRecord = RuntimeCall | NvtxRange | NvtxMark | OsCall
"""Anything that happens on a CPU thread."""


def thread_order(record: CpuRecord) -> tuple[int, int, int, int]:
    """Sort key of CPU records: by thread, then start; outer (longer) first; ranges first.

    With this order, a record that encloses another always comes before it, so one pass with a
    stack of open ranges sees every range before what it contains.
    """
    return record.order


@dataclass(slots=True)
class GpuOp:
    """A kernel, memory copy or memory set, with what the converter linked it to.

    Attributes:
        kind: Which activity table it is in; ``row`` its ``rowid`` there.
        name: Kernel name (demangled), or the copy/set description.
        process: :func:`~ncompass.traces.nsys.schema.process_key` of its process.
        correlation: The correlation id shared with its launching runtime call.
        launched: Whether a runtime call with that correlation id was found.
        first_of_launch: Whether it is the earliest operation of its launch (the one the
            launch arrow points to).
        nvtx_range, nvtx_path: The innermost NVTX range around its launch on the launching
            thread, and every enclosing range's name, outermost first.
        args: Table-specific details (grid, block, bytes, copy kind, ...).
    """

    kind: GpuOpKind
    row: int
    name: str
    start: int
    end: int
    process: int
    device: int
    context: int
    stream: int
    correlation: int | None
    launched: bool
    first_of_launch: bool
    nvtx_range: str | None
    nvtx_path: list[str] | None
    args: dict[str, object]

    @property
    def order(self) -> tuple[int, int, int, int, int, int]:
        """Sort key: by stream (process, device, context, stream), then start, longer first."""
        return (self.process, self.device, self.context, self.stream, self.start, -self.end)


__all__ = [
    "CpuRecord",
    "GpuOp",
    "GpuOpKind",
    "GpuOpLaunch",
    "NvtxAttributes",
    "NvtxMark",
    "NvtxRange",
    "NvtxRangeKind",
    "OsCall",
    "RuntimeCall",
    "thread_order",
]

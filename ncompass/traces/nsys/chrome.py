"""Chrome-trace events for an export's records, in the vocabulary ncompass analysis reads.

Categories follow the PyTorch profiler's traces, so ``ncompass summarize``/``breakdown``/
``filter`` treat a converted report like a Kineto trace:

- NVTX ranges on a thread: ``user_annotation`` complete events (markers); start/end ranges that
  end on another thread: ``nvtx_async`` begin/end pairs; marks: ``nvtx_mark`` instants;
- CUDA API calls: ``cuda_runtime`` (``cuda_driver`` for ``cu*`` calls) with ``args.correlation``;
- GPU work: ``kernel``, ``gpu_memcpy``, ``gpu_memset`` with ``args.correlation``;
- launch arrows: ``ac2g`` flow events whose id is the correlation;
- NVTX ranges projected onto a stream: ``gpu_user_annotation``;
- OS runtime calls: ``os_runtime``.

Timestamps are microseconds (floats keep the nanoseconds) on the report's clock.
"""

from __future__ import annotations

import re
from typing import Any

from ncompass.traces.events import MARKER_CATEGORY, Event
from ncompass.traces.nsys.linking import OpenRange
from ncompass.traces.nsys.records import (
    GpuOp,
    NvtxAttributes,
    NvtxMark,
    NvtxRange,
    OsCall,
    RuntimeCall,
)
from ncompass.traces.nsys.tracks import Track

PROJECTION_CATEGORY = "gpu_user_annotation"
ASYNC_CATEGORY = "nvtx_async"
MARK_CATEGORY = "nvtx_mark"
OS_CATEGORY = "os_runtime"
FLOW_CATEGORY = "ac2g"
GPU_CATEGORIES = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}

_API_VERSION = re.compile(r"_v\d+$")  # nsys names calls by their versioned symbol


def microseconds(nanoseconds: int) -> float:
    """Nanoseconds on the report's clock → trace microseconds."""
    return nanoseconds / 1000.0


def nvtx_range_event(open_range: OpenRange, track: Track) -> Event:
    """A range that began and ended on one thread, with the GPU work it launched."""
    record = open_range.record
    args = _nvtx_args(record.attributes, record.kind)
    if record.unclosed:
        args["unclosed"] = True  # never ended: drawn to the end of the report
    args["launches"] = open_range.launches
    args["gpu_ops"] = open_range.gpu_ops
    if open_range.gpu_ops:
        assert open_range.gpu_start is not None and open_range.gpu_end is not None
        args["gpu_time_us"] = microseconds(open_range.gpu_ns)
        args["gpu_start_us"] = microseconds(open_range.gpu_start)
        args["gpu_span_us"] = microseconds(open_range.gpu_end - open_range.gpu_start)
    return _complete(MARKER_CATEGORY, record.name, track, record.start, record.end, args)


def nvtx_async_events(record: NvtxRange, start: Track, end: Track) -> tuple[Event, Event]:
    """A start/end range that ends on another thread: a begin/end pair on its own track.

    Nsight Systems projects only ranges that start and end on one thread onto the GPU; these
    are shown, but no launch is credited to them.
    """
    identity = {"cat": ASYNC_CATEGORY, "name": record.name, "id": f"0x{record.row:x}"}
    args = _nvtx_args(record.attributes, record.kind)
    args["end_tid"] = end.tid
    if record.unclosed:
        args["unclosed"] = True
    begin = {**identity, "ph": "b", "pid": start.pid, "tid": start.tid, "args": args}
    begin["ts"] = microseconds(record.start)
    finish = {**identity, "ph": "e", "pid": start.pid, "tid": end.tid}
    finish["ts"] = microseconds(record.end)
    return begin, finish


def nvtx_mark_event(mark: NvtxMark, track: Track) -> Event:
    """An NVTX mark: a thread-scoped instant."""
    return {
        "ph": "i",
        "s": "t",
        "cat": MARK_CATEGORY,
        "name": mark.name,
        "pid": track.pid,
        "tid": track.tid,
        "ts": microseconds(mark.start),
        "args": _nvtx_args(mark.attributes, None),
    }


def runtime_call_event(call: RuntimeCall, track: Track, correlation: int | None) -> Event:
    """A CUDA API call; ``correlation`` is its report-wide unique correlation id."""
    name = _API_VERSION.sub("", call.name) or "CUDA API call"
    args: dict[str, Any] = {}
    if correlation is not None:
        args["correlation"] = correlation
    if call.return_value:
        args["return value"] = call.return_value
    category = "cuda_driver" if name.startswith("cu") and not name.startswith("cuda") else None
    return _complete(category or "cuda_runtime", name, track, call.start, call.end, args)


def launch_flow_start(call: RuntimeCall, track: Track, flow_id: int) -> Event:
    """The tail of the arrow from a launch to its GPU work."""
    return {
        "ph": "s",
        "cat": FLOW_CATEGORY,
        "name": FLOW_CATEGORY,
        "id": flow_id,
        "pid": track.pid,
        "tid": track.tid,
        "ts": microseconds(call.start),
    }


def launch_flow_end(op: GpuOp, track: Track, flow_id: int) -> Event:
    """The head of the arrow, bound to the GPU operation that starts there."""
    return {
        "ph": "f",
        "bp": "e",
        "cat": FLOW_CATEGORY,
        "name": FLOW_CATEGORY,
        "id": flow_id,
        "pid": track.pid,
        "tid": track.tid,
        "ts": microseconds(op.start),
    }


def gpu_op_event(op: GpuOp, track: Track, correlation: int | None) -> Event:
    """A kernel, copy or set, with its place, launch and enclosing NVTX ranges."""
    args: dict[str, Any] = {"device": op.device, "context": op.context, "stream": op.stream}
    if correlation is not None:
        args["correlation"] = correlation
    args.update(op.args)
    if op.nvtx_range is not None:
        args["nvtx_range"] = op.nvtx_range
        args["nvtx_path"] = op.nvtx_path
    return _complete(GPU_CATEGORIES[op.kind], op.name, track, op.start, op.end, args)


def os_call_event(call: OsCall, track: Track) -> Event:
    """An OS runtime library call."""
    args: dict[str, Any] = {}
    if call.return_value:
        args["return value"] = call.return_value
    return _complete(OS_CATEGORY, call.name, track, call.start, call.end, args)


def projection_event(
    name: str, domain: str, track: Track, start: int, end: int, ops: int, busy_ns: int, tid: int
) -> Event:
    """An NVTX range projected onto one stream: from its first GPU operation there to its last."""
    args = {
        "domain": domain or "default",
        "gpu_ops": ops,
        "gpu_time_us": microseconds(busy_ns),
        "thread": tid,
    }
    return _complete(PROJECTION_CATEGORY, name, track, start, end, args)


def _complete(
    category: str, name: str, track: Track, start: int, end: int, args: dict[str, Any]
) -> Event:
    return {
        "ph": "X",
        "cat": category,
        "name": name,
        "pid": track.pid,
        "tid": track.tid,
        "ts": microseconds(start),
        "dur": microseconds(max(end - start, 0)),
        "args": args,
    }


def _nvtx_args(attributes: NvtxAttributes, kind: str | None) -> dict[str, Any]:
    args: dict[str, Any] = {"domain": attributes.domain or "default"}
    if kind is not None:
        args["nvtx_kind"] = kind
    if attributes.color is not None:
        args["color"] = f"#{attributes.color & 0xFFFFFF:06x}"
    if attributes.category is not None:
        args["category"] = attributes.category
    if attributes.category_name is not None:
        args["category_name"] = attributes.category_name
    if attributes.payload is not None:
        args["payload"] = attributes.payload
    return args


__all__ = [
    "ASYNC_CATEGORY",
    "FLOW_CATEGORY",
    "GPU_CATEGORIES",
    "MARK_CATEGORY",
    "OS_CATEGORY",
    "PROJECTION_CATEGORY",
    "gpu_op_event",
    "launch_flow_end",
    "launch_flow_start",
    "microseconds",
    "nvtx_async_events",
    "nvtx_mark_event",
    "nvtx_range_event",
    "os_call_event",
    "projection_event",
    "runtime_call_event",
]

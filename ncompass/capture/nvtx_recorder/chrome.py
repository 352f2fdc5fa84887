"""NVTX recordings → Chrome trace events (Perfetto / chrome://tracing).

- Push/pop ranges become complete (``X``) events on their thread, properly nested, with
  category ``user_annotation`` so ncompass analysis treats them like torch profiler markers.
- Start/end ranges may overlap one another and end on another thread, so they become async
  (``b``/``e``) events, which Perfetto draws on their own tracks.
- Marks become thread-scoped instant (``i``) events.
- Process and thread names become metadata (``M``) events.

Timestamps are ``CLOCK_MONOTONIC`` microseconds. Each event's ``args`` hold the NVTX domain and,
when set, colour (``#RRGGBB``), category and payload.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ncompass.capture.nvtx_recorder.records import NvtxMark, NvtxRange, NvtxRecording

RANGE_CATEGORY = "user_annotation"
ASYNC_CATEGORY = "nvtx_async"
MARK_CATEGORY = "nvtx_mark"

ChromeEvent = dict[str, Any]


def to_chrome_events(
    recordings: Iterable[NvtxRecording], *, range_category: str = RANGE_CATEGORY
) -> list[ChromeEvent]:
    """Converts recordings (one per process) into Chrome trace events.

    Args:
        recordings: As returned by :func:`ncompass.capture.nvtx_recorder.read_recordings`.
        range_category: Category of push/pop ranges.

    Returns:
        The events: metadata first, then every range and mark in time order.
    """
    metadata: list[ChromeEvent] = []
    timed: list[ChromeEvent] = []
    for recording in recordings:
        metadata.extend(_metadata(recording))
        end_of_recording = recording.written_monotonic_ns
        for nvtx_range in recording.ranges:
            if nvtx_range.kind == "push_pop":
                timed.append(_complete_event(nvtx_range, range_category, end_of_recording))
            else:
                timed.extend(_async_events(nvtx_range, end_of_recording))
        timed.extend(_instant_event(mark) for mark in recording.marks)
    timed.sort(key=lambda event: event["ts"])
    return metadata + timed


def to_chrome_trace(recordings: Iterable[NvtxRecording]) -> dict[str, Any]:
    """Wraps :func:`to_chrome_events` into a trace document (``{"traceEvents": [...]}``)."""
    recordings = list(recordings)
    return {
        "traceEvents": to_chrome_events(recordings),
        "displayTimeUnit": "ms",
        "otherData": {
            "source": "ncompass NVTX recorder",
            "clock": "CLOCK_MONOTONIC",
            "dropped_events": sum(r.dropped_events for r in recordings),
        },
    }


def _microseconds(nanoseconds: int) -> float:
    return nanoseconds / 1000.0


def _args(
    domain: str, color: int | None, category: int | None, payload: int | float | None
) -> dict[str, Any]:
    args: dict[str, Any] = {"domain": domain or "default"}
    if color is not None:
        args["color"] = f"#{color & 0xFFFFFF:06x}"
    if category is not None:
        args["category"] = category
    if payload is not None:
        args["payload"] = payload
    return args


def _range_args(nvtx_range: NvtxRange) -> dict[str, Any]:
    args = _args(nvtx_range.domain, nvtx_range.color, nvtx_range.category, nvtx_range.payload)
    if nvtx_range.category_name is not None:
        args["category_name"] = nvtx_range.category_name
    if nvtx_range.end_ns is None:
        args["unclosed"] = True  # still open when the process exited; drawn until then
    return args


def _complete_event(nvtx_range: NvtxRange, category: str, end_of_recording: int) -> ChromeEvent:
    end_ns = nvtx_range.end_ns if nvtx_range.end_ns is not None else end_of_recording
    return {
        "ph": "X",
        "cat": category,
        "name": nvtx_range.name,
        "pid": nvtx_range.pid,
        "tid": nvtx_range.tid,
        "ts": _microseconds(nvtx_range.start_ns),
        "dur": _microseconds(max(end_ns - nvtx_range.start_ns, 0)),
        "args": _range_args(nvtx_range),
    }


def _async_events(nvtx_range: NvtxRange, end_of_recording: int) -> list[ChromeEvent]:
    end_ns = nvtx_range.end_ns if nvtx_range.end_ns is not None else end_of_recording
    identity = {
        "cat": ASYNC_CATEGORY,
        "name": nvtx_range.name,
        "id": f"0x{nvtx_range.range_id or 0:x}",
        "pid": nvtx_range.pid,
    }
    begin_args = _range_args(nvtx_range)
    if nvtx_range.end_tid is not None and nvtx_range.end_tid != nvtx_range.tid:
        begin_args["end_tid"] = nvtx_range.end_tid
    return [
        {
            **identity,
            "ph": "b",
            "tid": nvtx_range.tid,
            "ts": _microseconds(nvtx_range.start_ns),
            "args": begin_args,
        },
        {
            **identity,
            "ph": "e",
            "tid": nvtx_range.end_tid if nvtx_range.end_tid is not None else nvtx_range.tid,
            "ts": _microseconds(max(end_ns, nvtx_range.start_ns)),
        },
    ]


def _instant_event(mark: NvtxMark) -> ChromeEvent:
    return {
        "ph": "i",
        "s": "t",
        "cat": MARK_CATEGORY,
        "name": mark.name,
        "pid": mark.pid,
        "tid": mark.tid,
        "ts": _microseconds(mark.time_ns),
        "args": _args(mark.domain, mark.color, mark.category, mark.payload),
    }


def _metadata(recording: NvtxRecording) -> list[ChromeEvent]:
    events: list[ChromeEvent] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": recording.pid,
            "tid": 0,
            "args": {"name": recording.cmdline or f"pid {recording.pid}"},
        }
    ]
    for thread in recording.threads.values():
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": recording.pid,
                "tid": thread.tid,
                "args": {"name": thread.display_name or f"thread {thread.tid}"},
            }
        )
    return events

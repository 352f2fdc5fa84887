"""Cut windows out of a trace, streaming: each window is the span of one named range.

A window becomes a trace of its own holding every event that overlaps its range (the range
renamed to the window's title), after the metadata events (process and thread names) that
Perfetto needs to draw it. Two passes over the source, one :class:`TraceWriter` per window:
memory holds the metadata events and the windows' spans, never the trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncompass.traces.events import Event
from ncompass.traces.reader import TraceReader
from ncompass.traces.writer import TraceWriter


@dataclass(frozen=True)
class WindowCut:
    """One window: the range named ``marker`` becomes a trace at ``output_path``.

    Attributes:
        marker: The name of the complete (``X``) event whose span is the window.
        title: The name the range gets in the window's trace.
        output_path: Where to write it (``.json`` or ``.json.gz``).
    """

    marker: str
    title: str
    output_path: Path


def write_windows(source: str | Path, windows: Sequence[WindowCut]) -> list[Path]:
    """Write one trace per window whose range is in ``source``; return the paths written.

    A window whose range never appears is skipped. The first complete event with the window's
    name (or async ``b``/``e`` pair: NVTX start/end ranges) gives its span; an event overlaps
    it when it starts no later than the span ends and ends no earlier than it starts.

    Raises:
        TraceError: ``source`` is missing or corrupt, or a window cannot be written.
    """
    metadata_events, spans, header, trailer = _first_pass(
        Path(source), {window.marker for window in windows}
    )
    found = [(window, spans[window.marker]) for window in windows if window.marker in spans]
    if not found:
        return []
    with ExitStack() as stack:
        writers = [
            stack.enter_context(TraceWriter(window.output_path, metadata=header))
            for window, _ in found
        ]
        for writer in writers:
            writer.write_many(metadata_events)
        for batch in TraceReader(source, progress=False).batches():
            for (window, (start, end)), writer in zip(found, writers, strict=True):
                writer.write_many(_inside(batch, window, start, end))
        for writer in writers:
            writer.close(trailer)
    return [window.output_path for window, _ in found]


def _first_pass(
    source: Path, markers: set[str]
) -> tuple[list[Event], dict[str, tuple[float, float]], dict[str, Any], dict[str, Any]]:
    """The metadata events, each marker's first span, the keys before and after the events."""
    reader = TraceReader(source, progress=False)
    metadata_events: list[Event] = []
    spans: dict[str, tuple[float, float]] = {}
    opened: dict[str, float] = {}
    header: dict[str, Any] | None = None
    for batch in reader.batches():
        if header is None:  # the keys before traceEvents are all read once events arrive
            header = dict(reader.metadata)
        for event in batch:
            phase = event.get("ph")
            if phase == "M":
                metadata_events.append(event)
            elif phase == "X" and event.get("name") in markers and event["name"] not in spans:
                start = float(event.get("ts", 0))
                spans[event["name"]] = (start, start + float(event.get("dur", 0)))
            elif phase in ("b", "e") and event.get("name") in markers:  # an async range
                name, ts = event["name"], float(event.get("ts", 0))
                if name in spans:
                    continue
                if phase == "b":
                    opened.setdefault(name, ts)
                elif name in opened:
                    spans[name] = (opened.pop(name), ts)
    header = header if header is not None else dict(reader.metadata)
    trailer = {key: value for key, value in reader.metadata.items() if key not in header}
    return metadata_events, spans, header, trailer


def _inside(batch: list[Event], window: WindowCut, start: float, end: float) -> Iterator[Event]:
    for event in batch:
        if event.get("ph") == "M":
            continue
        ts = event.get("ts")
        if not isinstance(ts, int | float):
            continue
        if ts + (event.get("dur") or 0) >= start and ts <= end:
            yield {**event, "name": window.title} if event.get("name") == window.marker else event


__all__ = ["WindowCut", "write_windows"]

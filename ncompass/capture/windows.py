"""Cut a window out of a written trace: the events during one ``capture_trace`` call.

Nested ``capture_trace`` calls (and calls inside ``ncompass run``) cannot start a second torch
profiler, so they record a uniquely named range instead; once the outer trace is written, each
window becomes a trace of its own holding every event that overlaps the range, plus the
metadata events (process and thread names) that Perfetto needs to draw it.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ncompass.capture.backends.torch import TraceWindow
from ncompass.errors import CaptureError


def write_windows(trace_path: Path, windows: Sequence[TraceWindow]) -> list[Path]:
    """Write one trace per window, cut from the trace at ``trace_path``."""
    document = _load(trace_path)
    events: list[dict[str, Any]] = document.get("traceEvents", [])
    metadata = [event for event in events if event.get("ph") == "M"]
    written: list[Path] = []
    for window in windows:
        span = _span_of(events, window.marker)
        if span is None:
            continue
        start, end = span
        kept = []
        for event in events:
            if event.get("ph") == "M":
                continue
            ts = event.get("ts")
            if not isinstance(ts, int | float):
                continue
            finish = ts + (event.get("dur") or 0)
            if finish >= start and ts <= end:
                if event.get("name") == window.marker:
                    event = {**event, "name": window.title}
                kept.append(event)
        sliced = {**document, "traceEvents": metadata + kept}
        _write(window.output_path, sliced)
        written.append(window.output_path)
    return written


def _span_of(events: list[dict[str, Any]], marker: str) -> tuple[float, float] | None:
    for event in events:
        if event.get("name") == marker and event.get("ph") == "X":
            start = float(event.get("ts", 0))
            return start, start + float(event.get("dur", 0))
    return None


def _load(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        document = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError, gzip.BadGzipFile) as error:
        raise CaptureError(f"cannot read the trace just written ({path}): {error}") from None
    if not isinstance(document, dict):
        raise CaptureError(f"{path}: not a Chrome trace (expected a JSON object)")
    return document


def _write(path: Path, document: dict[str, Any]) -> None:
    data = orjson.dumps(document)
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


__all__ = ["write_windows"]

"""Windows cut by streaming hold what cutting the loaded document gave, file order kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ncompass.traces.windows import WindowCut, write_windows
from tests.traces.builders import TraceBuilder


def whole_document_cut(document: dict[str, Any], marker: str, title: str) -> dict[str, Any]:
    """The cut as the in-memory implementation made it, as the reference."""
    events = document["traceEvents"]
    span = next(e for e in events if e.get("name") == marker and e.get("ph") == "X")
    start, end = span["ts"], span["ts"] + span.get("dur", 0)
    kept = []
    for event in events:
        if event.get("ph") == "M" or not isinstance(event.get("ts"), int | float):
            continue
        if event["ts"] + (event.get("dur") or 0) >= start and event["ts"] <= end:
            kept.append({**event, "name": title} if event.get("name") == marker else event)
    return {**document, "traceEvents": [e for e in events if e.get("ph") == "M"] + kept}


def test_each_window_holds_the_events_overlapping_its_range(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.marker("ncompass.window#1:inner", 100, 50)
    builder.cpu_op("aten::exp", 110, 10)
    builder.marker("ncompass.window#2:inner", 300, 50)
    builder.cpu_op("aten::sin", 320, 5)
    builder.cpu_op("aten::late", 400, 5)
    builder.add(ph="M", name="thread_name", pid=1, tid=1, args={"name": "main"})
    source = builder.write(tmp_path / "outer.json")
    document = json.loads(source.read_text())
    windows = [
        WindowCut("ncompass.window#1:inner", "inner", tmp_path / "inner.json"),
        WindowCut("ncompass.window#2:inner", "inner", tmp_path / "inner-1.json.gz"),
        WindowCut("ncompass.window#3:never", "never", tmp_path / "never.json"),
    ]
    written = write_windows(source, windows)
    assert written == [tmp_path / "inner.json", tmp_path / "inner-1.json.gz"]
    assert not (tmp_path / "never.json").exists()
    first = json.loads((tmp_path / "inner.json").read_text())
    assert first == whole_document_cut(document, "ncompass.window#1:inner", "inner")
    names = [e["name"] for e in first["traceEvents"] if e["ph"] != "M"]
    assert "aten::exp" in names and "aten::sin" not in names and "inner" in names
    assert first["traceEvents"][0]["ph"] == "M"  # the metadata events come first

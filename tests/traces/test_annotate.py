"""Adding args to some events of a trace, streaming, in place and atomically."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ncompass.traces.annotate import annotate_trace
from ncompass.traces.reader import TraceReader
from tests.traces.builders import TraceBuilder


def _trace(path: Path) -> Path:
    builder = TraceBuilder(metadata={"schemaVersion": 1, "deviceProperties": [{"id": 0}]})
    builder.cpu_op("graph_0_cpp_fused_relu_0", 0, 5).cpu_op("aten::mm", 5, 5)
    builder.add(ph="M", name="thread_name", pid=100, tid=1, args={"name": "main"})
    builder.cpu_op("graph_0_cpp_fused_relu_0", 10, 5)
    document = builder.document()
    document["traceName"] = "after the events"
    text = json.dumps(document).encode()
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


def _relu(event: dict[str, Any]) -> dict[str, Any] | None:
    return {"ncompass_markers": ["relu"]} if "relu" in str(event.get("name")) else None


@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz"])
def test_matching_events_get_the_args_and_the_rest_stays(tmp_path: Path, name: str) -> None:
    path = _trace(tmp_path / name)
    assert annotate_trace(path, _relu) == 2
    events = list(TraceReader(path))
    assert [e["args"].get("ncompass_markers") for e in events if e["ph"] == "X"] == [
        ["relu"],
        None,
        ["relu"],
    ]
    assert events[2] == {
        "ph": "M",
        "name": "thread_name",
        "pid": 100,
        "tid": 1,
        "args": {"name": "main"},
    }
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if name.endswith(".gz") else raw).decode()
    document = json.loads(text)
    assert document["deviceProperties"] == [{"id": 0}]
    assert document["traceName"] == "after the events"
    # keys keep their side of traceEvents
    assert (
        text.index('"deviceProperties"') < text.index('"traceEvents"') < text.index('"traceName"')
    )
    assert list(tmp_path.iterdir()) == [path]


def test_a_trace_with_nothing_to_add_is_left_untouched(tmp_path: Path) -> None:
    path = _trace(tmp_path / "trace.json")
    before = path.read_bytes()
    assert annotate_trace(path, lambda event: None) == 0
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]


def test_a_failure_midway_keeps_the_original(tmp_path: Path) -> None:
    path = _trace(tmp_path / "trace.json")
    before = path.read_bytes()

    def failing(event: dict[str, Any]) -> dict[str, Any] | None:
        if event.get("ph") == "M":
            raise RuntimeError("interrupted")
        return _relu(event)

    with pytest.raises(RuntimeError):
        annotate_trace(path, failing)
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]

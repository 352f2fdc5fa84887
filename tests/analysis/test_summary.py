from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncompass.analysis import summarize_trace
from ncompass.errors import TraceError
from tests.traces.builders import TraceBuilder, shared_traces


def assert_seed_shape(summary: dict) -> None:
    assert set(summary) == {"markdown", "structured"}
    assert isinstance(summary["markdown"], str) and summary["markdown"].startswith(
        "# Trace summary"
    )
    structured = summary["structured"]
    assert isinstance(structured["operations"], list)
    assert all(
        isinstance(op, dict) and {"kind", "name"} <= set(op) for op in structured["operations"]
    )
    assert all(
        isinstance(b, dict) and {"rule", "subject", "severity", "evidence"} <= set(b)
        for b in structured["bottlenecks"]
    )
    assert all(isinstance(text, str) for text in structured["recommendations"])
    json.dumps(summary)  # JSON-ready


@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_every_shared_trace_summarizes(path: Path) -> None:
    summary = summarize_trace(path, top=5)
    assert_seed_shape(summary)
    kinds = {op["kind"] for op in summary["structured"]["operations"]}
    assert "marker" in kinds and "cpu_op" in kinds
    assert sum(1 for op in summary["structured"]["operations"] if op["kind"] == "kernel") <= 5


def test_torch_trace_summary_lists_its_markers(torch_trace: Path) -> None:
    summary = summarize_trace(torch_trace)
    assert_seed_shape(summary)
    markers = {op["name"] for op in summary["structured"]["operations"] if op["kind"] == "marker"}
    assert markers == {"model.forward", "model.linear", "model.activation"}
    rules = {finding["rule"] for finding in summary["structured"]["bottlenecks"]}
    assert rules == {"dominant-marker"}  # CPU only: said once, in the first line, not as advice
    assert summary["markdown"].count("CPU only (no GPU events)") == 1
    assert "model.forward" in summary["markdown"]


def test_feedback_context_focuses_on_matching_markers(tmp_path: Path) -> None:
    path = (
        TraceBuilder()
        .marker("mypkg.attention:Attention.forward", 0, 10)
        .marker("other", 20, 5)
        .write(tmp_path / "t.json")
    )
    summary = summarize_trace(
        path, feedback_context={"feedback_text": "why slow?", "target_module": "mypkg.attention"}
    )
    focus = summary["structured"]["focus"]
    assert focus["markers"] == ["mypkg.attention:Attention.forward"]
    assert "## Focus" in summary["markdown"] and "why slow?" in summary["markdown"]


def test_empty_trace_summary_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"traceEvents": []}')
    summary = summarize_trace(path)
    assert_seed_shape(summary)
    assert summary["structured"]["operations"] == []
    assert [b["rule"] for b in summary["structured"]["bottlenecks"]] == ["empty-trace"]
    assert "holds no events" in summary["markdown"]


def test_missing_trace_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"missing\.json"):
        summarize_trace(tmp_path / "missing.json")

"""The summary's TypedDicts describe what ``summarize_trace`` really writes, key for key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from ncompass.analysis import Summary, summarize_trace
from tests.traces.builders import TraceBuilder, shared_trace

SUMMARY = TypeAdapter(Summary)


def assert_matches_summary_type(summary: Any) -> None:
    """Strict: no coercion, every required key present, and no key the types do not declare
    (validation drops undeclared keys, so the result would differ from the input)."""
    assert SUMMARY.validate_python(summary, strict=True) == summary


@pytest.mark.parametrize("folder", ["amd_trace", "nccl_parser_config", "ns_resolution_trace"])
def test_summaries_of_real_gpu_traces_match_the_types(folder: str) -> None:
    assert_matches_summary_type(summarize_trace(shared_trace(folder), top=5))


def test_summary_of_a_real_torch_profiler_trace_matches_the_types(torch_trace: Path) -> None:
    summary = summarize_trace(
        torch_trace, feedback_context={"feedback_text": "why?", "target_module": "model"}
    )
    assert summary["structured"]["focus"]["markers"]  # the optional parts are filled in too
    assert_matches_summary_type(summary)


def test_a_marker_without_ranges_matches_the_types(tmp_path: Path) -> None:
    path = TraceBuilder().marker("only", 0, 10).write(tmp_path / "t.json")
    assert_matches_summary_type(summarize_trace(path))


def test_the_check_refuses_an_undeclared_key_and_a_wrong_type(torch_trace: Path) -> None:
    summary: Any = summarize_trace(torch_trace)
    extra = {**summary, "structured": {**summary["structured"], "undeclared": 1}}
    with pytest.raises(AssertionError):
        assert_matches_summary_type(extra)
    trace = {**summary["structured"]["trace"], "gpu_events": "none"}
    wrong = {**summary, "structured": {**summary["structured"], "trace": trace}}
    with pytest.raises(ValidationError, match="gpu_events"):
        assert_matches_summary_type(wrong)

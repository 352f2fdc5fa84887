"""The seed classes at their seed paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncompass.trace.profile import NvtxContext as ReexportedNvtxContext
from ncompass.trace.profile.nvtx import NvtxContext
from ncompass.trace.profile.torch import TorchRecordContext


def test_seed_paths_export_the_runtime_classes() -> None:
    from ncompass.runtime import NvtxContext as RuntimeNvtx
    from ncompass.runtime import TorchRecordContext as RuntimeTorch

    assert NvtxContext is RuntimeNvtx is ReexportedNvtxContext
    assert TorchRecordContext is RuntimeTorch


def test_context_managers_are_reusable_and_reentrant() -> None:
    marker = NvtxContext("reused", color="blue")
    with marker, marker:
        pass
    with marker as entered:
        assert entered is marker
    assert repr(marker) == "NvtxContext('reused')"


def test_torch_record_context_appears_in_a_profiler_trace(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    activities = [torch.profiler.ProfilerActivity.CPU]
    with (
        torch.profiler.profile(activities=activities) as prof,
        TorchRecordContext(name="attention_step"),
        TorchRecordContext("inner", values={"ignored": True}),
    ):
        torch.ones(3).sum()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    names = [
        e["name"]
        for e in json.loads(trace.read_text())["traceEvents"]
        if e.get("cat") == "user_annotation"
    ]
    assert names == ["attention_step", "inner"]


def test_exceptions_leave_context_managers_unchanged() -> None:
    error = RuntimeError("x")
    with pytest.raises(RuntimeError) as caught, TorchRecordContext("failing"):
        raise error
    assert caught.value is error

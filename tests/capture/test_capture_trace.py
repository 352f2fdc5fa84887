"""``capture_trace``: a pass-through unless profiling is on; then one trace file per call."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ncompass import capture_trace
from ncompass.capture.runner import RunOptions, run


def _user_annotations(path: Path) -> list[str]:
    events = json.loads(path.read_text())["traceEvents"]
    return [e["name"] for e in events if e.get("cat") == "user_annotation"]


def test_pass_through_when_profiling_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NCOMPASS_PROFILE", raising=False)
    monkeypatch.setenv("NCOMPASS_TRACE_DIR", str(tmp_path))

    @capture_trace(trace_name="off")
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5
    assert add.__name__ == "add"
    assert list(tmp_path.iterdir()) == []


def test_one_file_per_call_and_per_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setenv("NCOMPASS_PROFILE", "1")
    monkeypatch.setenv("NCOMPASS_TRACE_DIR", str(tmp_path))

    @capture_trace(trace_name="matrix_ops", record_shapes=True)
    def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    @capture_trace
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    a = torch.ones(4, 4)
    assert torch.equal(matmul(a, a), torch.full((4, 4), 4.0))
    matmul(a, a)
    double(a)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "double.json",
        "matrix_ops-1.json",
        "matrix_ops.json",
    ]
    assert "matrix_ops" in _user_annotations(tmp_path / "matrix_ops.json")
    ops = json.loads((tmp_path / "matrix_ops.json").read_text())["traceEvents"]
    assert any(e.get("name") == "aten::mm" and "Input Dims" in e.get("args", {}) for e in ops)


def test_nested_calls_get_their_own_slice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv("NCOMPASS_PROFILE", "1")
    monkeypatch.setenv("NCOMPASS_TRACE_DIR", str(tmp_path))

    @capture_trace(trace_name="inner")
    def inner(x: torch.Tensor) -> torch.Tensor:
        return x.exp()

    @capture_trace(trace_name="outer")
    def outer(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        return inner(y) + inner(y)

    outer(torch.ones(8))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "inner-1.json",
        "inner.json",
        "outer.json",
    ]
    outer_names = _user_annotations(tmp_path / "outer.json")
    assert "outer" in outer_names
    inner_ops = {
        e["name"] for e in json.loads((tmp_path / "inner.json").read_text())["traceEvents"]
    }
    assert "aten::exp" in inner_ops and "aten::sin" not in inner_ops
    assert "inner" in _user_annotations(tmp_path / "inner.json")


def test_inside_ncompass_run(tmp_path: Path) -> None:
    script = tmp_path / "uses_decorator.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from ncompass import capture_trace

            @capture_trace(trace_name="step")
            def step(x):
                return x.relu()

            for _ in range(2):
                step(torch.randn(16))
            """
        )
    )
    result = run(RunOptions(script=str(script), output_dir=tmp_path / "traces", trace_name="whole"))
    assert result.exit_code == 0
    names = sorted(p.name for p in (tmp_path / "traces").glob("*.json"))
    assert names == ["step-1.json", "step.json", "whole.json", "whole.ncompass.json"]
    assert "aten::relu" in {
        e["name"]
        for e in json.loads((tmp_path / "traces" / "step.json").read_text())["traceEvents"]
    }


def test_a_window_records_only_the_chosen_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setenv("NCOMPASS_PROFILE", "1")
    monkeypatch.setenv("NCOMPASS_TRACE_DIR", str(tmp_path))
    recorded: list[int] = []

    @capture_trace(trace_name="step", window=(3, 2))
    def step(n: int) -> int:
        if torch.autograd.profiler._is_profiler_enabled:
            recorded.append(n)
        return n

    assert [step(n) for n in range(1, 7)] == [1, 2, 3, 4, 5, 6]
    assert recorded == [3, 4]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["step-1.json", "step.json"]
    with pytest.raises(ValueError, match="FIRST, COUNT"):
        capture_trace(window=(0, 2))

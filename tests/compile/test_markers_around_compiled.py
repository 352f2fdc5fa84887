"""Markers around compiled code keep recording and contain the compiled region's events.

A marked caller of a compiled model, and a marked module whose child's ``forward`` was
compiled in place (``nn.Module.compile``): both run under the real torch profiler, and the
Chrome trace it writes is read back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from ncompass.spec.models import RewriteConfig  # noqa: E402
from tests.support.modules import ModuleLab  # noqa: E402

CALLERS = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


torch.manual_seed(0)
compiled_block = torch.compile(Block().eval(), fullgraph=True)


def infer(x):
    return compiled_block(x)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Block()
        self.inner.compile(fullgraph=True)

    def forward(self, x):
        y = self.inner(x)
        return y * 2
"""

SPEC: dict[str, Any] = {
    "version": 1,
    "context": "torch",
    "targets": [
        {
            "module": "compiled_callers",
            "functions": [
                {"qualname": "infer", "name": "infer"},
                {"qualname": "Outer.forward", "name": "outer"},
            ],
            "calls": [{"in": "Outer.forward", "call": "self.inner", "name": "outer.inner"}],
        }
    ],
}


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[dict[str, Any]]]:
    """The complete events of one profiled run: each caller compiled, warmed up, then run."""
    root = tmp_path_factory.mktemp("callers")
    lab = ModuleLab(root)
    lab.write("compiled_callers", CALLERS)
    sys.path.insert(0, str(root))
    try:
        module = lab.load("compiled_callers", RewriteConfig.from_dict(SPEC))
        outer = module.Outer().eval()
        x = torch.ones(4, 16)
        with torch._inductor.config.patch({"cpp.enable_kernel_profile": True}), torch.no_grad():
            module.infer(x), outer(x)  # compile outside the profiled window
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
                module.infer(x)
                outer(x)
        path = Path(root) / "trace.json"
        p.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
        yield [event for event in events if event.get("ph") == "X"]
    finally:
        sys.path.remove(str(root))
        lab.close()


def _inside(outer: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    start, end = outer["ts"], outer["ts"] + outer["dur"]
    return [
        event["name"]
        for event in events
        if event is not outer
        and event.get("tid") == outer.get("tid")
        and start <= event["ts"]
        and event["ts"] + event["dur"] <= end
    ]


def _marker(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [e for e in events if e["name"] == name and e.get("cat") == "user_annotation"]
    assert len(found) == 1, f"{name}: {len(found)} events"
    return found[0]


@pytest.mark.parametrize("marker", ["infer", "outer", "outer.inner"])
def test_marker_around_a_compiled_call_contains_the_compiled_region(
    trace: list[dict[str, Any]], marker: str
) -> None:
    inside = _inside(_marker(trace, marker), trace)
    assert any(name.startswith("Torch-Compiled Region") for name in inside), inside
    # Inductor's own kernel for the fused ReLU, profiled on CPU
    assert any("cpp_fused" in name for name in inside), inside


def test_the_caller_marker_ends_after_the_compiled_region(trace: list[dict[str, Any]]) -> None:
    outer = _marker(trace, "outer")
    inner = _marker(trace, "outer.inner")
    regions = [e for e in _inside(inner, trace) if e.startswith("Torch-Compiled Region")]
    assert len(regions) == 1
    assert outer["ts"] <= inner["ts"]
    assert inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


def test_the_worked_example_of_the_docs(tmp_path: Path) -> None:
    # docs/compile.md: `ncompass run --config examples/compile/spec.yaml examples/compile/run.py`
    repo = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "ncompass", "run", "--config", "examples/compile/spec.yaml"]
    command += ["--output-dir", str(tmp_path), "--trace-name", "example"]
    done = subprocess.run(
        [*command, "examples/compile/run.py", "--steps", "2"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "compiled and eager agree over 2 steps" in done.stdout
    events = [
        e
        for e in json.loads((tmp_path / "example.json").read_text())["traceEvents"]
        if e.get("ph") == "X"
    ]
    spec_markers = {"mlp", "block[0]", "block[1]", "block.up", "gate", "block.gate_and_down"}
    last_step = _marker(events, "step[1]")
    compiled = [e for e in events if e["name"] == "compiled"][-1]
    eager = [e for e in events if e["name"] == "eager"][-1]
    assert set(_inside(last_step, events)) >= {"compiled", "eager"}
    inside_compiled = _inside(compiled, events)
    assert any(name.startswith("Torch-Compiled Region") for name in inside_compiled)
    assert not spec_markers & set(inside_compiled)
    assert spec_markers <= set(_inside(eager, events))


LEFT_TO_PYTHON = """
import torch


@torch.compiler.disable
def log_stats(x):
    return float(x.mean())


def forward(x):
    y = x * 2
    log_stats(y)
    return y + 1
"""


def test_marker_in_code_dynamo_leaves_to_python_records(lab: ModuleLab) -> None:
    lab.write("left_to_python", LEFT_TO_PYTHON)
    spec = {"targets": [{"module": "left_to_python", "functions": [{"qualname": "log_stats"}]}]}
    module = lab.load("left_to_python", lab.spec(spec, context="torch"))
    torch._dynamo.reset()
    compiled = torch.compile(module.forward)  # default mode: log_stats is a graph break
    compiled(torch.ones(3))
    with torch.profiler.profile() as profiler:
        compiled(torch.ones(3))
    names = [event.name for event in profiler.events()]
    assert names.count("left_to_python:log_stats") == 1, names

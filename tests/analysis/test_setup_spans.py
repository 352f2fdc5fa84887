"""Imports and model construction apart from the steady state (issue 22, item 5): a real
``ncompass run`` of a program that imports a slow module, constructs a model with a costly
``__init__`` and runs a marked step; ``summarize`` of its trace, and of the same trace with a
sidecar from before setup spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from ncompass.analysis import summarize_trace
from ncompass.analysis.setup_text import NOT_TOLD_APART
from tests.analysis.test_summary_types import assert_matches_summary_type

REPO = Path(__file__).resolve().parents[2]
IMPORT_SLEEP_S = 0.6
CONSTRUCTION_SLEEP_S = 0.4

SLOW_IMPORT = f"""\
import time

time.sleep({IMPORT_SLEEP_S})
"""

MODEL_CODE = f"""\
import time

import torch
from torch import nn


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(256, 256)
        for _ in range(20):
            nn.init.normal_(self.linear.weight)


def make_inner():
    return Inner()


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        time.sleep({CONSTRUCTION_SLEEP_S})
        self.blocks = nn.ModuleList([make_inner() for _ in range(4)])


def step(model, x):
    for block in model.blocks:
        x = torch.tanh(block.linear(x))
    return x
"""

PROGRAM = """\
import torch

import slow_import
from model_code import Outer, step

torch.set_num_threads(1)
model = Outer()
x = torch.ones(32, 256)
for _ in range(5):
    x = step(model, x)
"""

SPEC = """\
version: 1
context: torch
targets:
  - module: model_code
    functions:
      - qualname: step
        name: step
      - qualname: make_inner
        name: build
"""


@dataclass(frozen=True)
class SetupRun:
    folder: Path

    @property
    def trace(self) -> Path:
        return self.folder / "out" / "setup.json"

    @property
    def sidecar(self) -> Path:
        return self.folder / "out" / "setup.ncompass.json"


@pytest.fixture(scope="module")
def setup_run(tmp_path_factory: pytest.TempPathFactory) -> SetupRun:
    folder = tmp_path_factory.mktemp("setup_spans")
    (folder / "slow_import.py").write_text(SLOW_IMPORT)
    (folder / "model_code.py").write_text(MODEL_CODE)
    (folder / "program.py").write_text(PROGRAM)
    (folder / "spec.yaml").write_text(SPEC)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NCOMPASS_PROFILE", None)
    command = [sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"]
    command += ["--trace-name", "setup", "program.py"]
    done = subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return SetupRun(folder)


def _cpu_operators(structured: dict) -> set[str]:
    return {op["name"] for op in structured["operations"] if op["kind"] == "cpu_op"}


def test_the_sidecar_records_the_outermost_import_and_construction(setup_run: SetupRun) -> None:
    spans = json.loads(setup_run.sidecar.read_text())["setup_spans"]
    by_label = {(span["kind"], span["label"]): span for span in spans}
    slow = by_label[("import", "slow_import")]
    assert slow["end_unix_us"] - slow["start_unix_us"] >= IMPORT_SLEEP_S * 1e6
    # the four Inner modules, their Linear layers and the ModuleList are inside Outer's span
    constructions = [span for span in spans if span["kind"] == "construction"]
    assert [span["label"] for span in constructions] == ["Outer"]
    assert all(span["pid"] == slow["pid"] for span in spans)


def test_summarize_reports_imports_and_construction_apart(setup_run: SetupRun) -> None:
    summary = summarize_trace(setup_run.trace)
    structured = summary["structured"]
    setup = structured["trace"]["setup"]
    wall = structured["trace"]["cpu_wall_us"]
    assert setup["setup_spans_recorded"]
    assert IMPORT_SLEEP_S * 1e6 <= setup["imports_us"] < wall
    assert setup["imports_top"][0]["label"] == "slow_import"
    assert CONSTRUCTION_SLEEP_S * 1e6 <= setup["construction_us"] < wall - setup["imports_us"]
    assert setup["construction_top"] == [
        {"label": "Outer", "us": setup["construction_us"], "count": 1}
    ]
    # the steady state is the run less its setup; the setup ran outside every marker but 'build'
    assert setup["steady_us"] == pytest.approx(wall - setup["setup_us"])
    assert setup["setup_us"] >= setup["imports_us"] + setup["construction_us"] - 1
    assert setup["steady_us"] < wall - (IMPORT_SLEEP_S + CONSTRUCTION_SLEEP_S) * 1e6
    assert 0 < setup["other_outside_markers_us"] < setup["setup_outside_markers_us"]
    markdown = summary["markdown"]
    assert "Setup: imports " in markdown and "(top: slow_import " in markdown
    assert ", model construction " in markdown and " (Outer):" in markdown
    assert "(setup " in markdown and ", the rest " in markdown
    assert NOT_TOLD_APART not in markdown
    assert "<p>Setup: imports " in summary.to_html()
    assert_matches_summary_type(summary)


def test_the_constructions_operators_leave_the_operator_table(setup_run: SetupRun) -> None:
    structured = summarize_trace(setup_run.trace)["structured"]
    operators = _cpu_operators(structured)
    # weight initialisation ran only inside Outer's construction; the step's work stays
    assert not {"aten::normal_", "aten::uniform_"} & operators, operators
    assert {"aten::addmm", "aten::tanh"} <= operators
    # a marker inside setup is still a marker
    markers = {row["name"]: row for row in structured["markers"]}
    assert markers["build"]["calls"] == 4 and markers["step"]["calls"] == 5


def test_a_sidecar_without_setup_spans_summarizes_as_before(
    setup_run: SetupRun, tmp_path: Path
) -> None:
    trace = tmp_path / "older.json"
    trace.write_bytes(setup_run.trace.read_bytes())
    sidecar = orjson.loads(setup_run.sidecar.read_bytes())
    sidecar.pop("setup_spans", None)
    (tmp_path / "older.ncompass.json").write_bytes(orjson.dumps(sidecar))
    summary = summarize_trace(trace)
    setup = summary["structured"]["trace"]["setup"]
    assert not setup["setup_spans_recorded"]
    assert setup["imports_us"] == 0 and setup["construction_us"] == 0
    assert "aten::normal_" in _cpu_operators(summary["structured"])
    markdown = summary["markdown"]
    assert markdown.count(NOT_TOLD_APART) == 1 and "Setup: imports" not in markdown
    assert "outside every marker: " in markdown and "(setup " not in markdown
    assert_matches_summary_type(summary)


def test_an_import_made_while_compiling_counts_as_compilation(tmp_path: Path) -> None:
    from tests.traces.builders import CPU_PID, TraceBuilder

    builder = TraceBuilder()
    builder.metadata["baseTimeNanoseconds"] = 1_000_000_000
    trace = (
        builder.marker("step", 0, 1000)
        .cpu_op("dynamo", 10, 900)
        .cpu_op("entire_frame_compile", 11, 898)
        .cpu_op("aten::addmm", 920, 50)
        .cpu_op("aten::uniform_", 1200, 100)
        .marker("step", 1500, 60)
        .cpu_op("aten::addmm", 1500, 50)
        .write(tmp_path / "compiled.json")
    )
    base = 1_000_000.0  # µs: baseTimeNanoseconds / 1000; the trace's origin is its first ts, 0

    def span(kind: str, label: str, start: float, end: float) -> dict:
        return {
            "kind": kind,
            "label": label,
            "start_unix_us": base + start,
            "end_unix_us": base + end,
            "pid": CPU_PID,
            "tid": 1,
        }

    spans = [
        span("import", "sympy.core", 100, 400),  # Inductor importing as it compiles
        span("import", "mypkg", 1100, 1150),
        span("construction", "Model", 1190, 1400),
    ]
    (tmp_path / "compiled.ncompass.json").write_bytes(orjson.dumps({"setup_spans": spans}))
    summary = summarize_trace(trace)
    setup = summary["structured"]["trace"]["setup"]
    assert setup["imports_us"] == 50 and setup["imports_top"] == [
        {"label": "mypkg", "us": 50, "count": 1}
    ]
    assert setup["construction_us"] == 210 and setup["compile_us"] == 900
    assert setup["setup_us"] == 900 + 50 + 210
    assert setup["steady_us"] == 1560 - 1160
    operators = _cpu_operators(summary["structured"])
    assert "aten::uniform_" not in operators and "aten::addmm" in operators
    setup_line = "Setup: imports 50.0 µs (mypkg), model construction 210.0 µs (Model), "
    assert setup_line in summary["markdown"]

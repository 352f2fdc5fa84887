"""The session on a model compiled with ``torch.compile``: the answer moves from the call into the
compiled code down to the source lines whose Inductor kernels hold the time (markers inside the
compiled code do not record, and the stack sampler sees only the compiled function's ``def``
line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(128, 128)
        self.b = nn.Linear(128, 128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x)) + 1.0
        g = torch.sigmoid(h) * h
        for _ in range(30):
            g = torch.tanh(g) * 0.5 + torch.exp(-g * g)
        return self.b(g)
"""
SLOW_LINE = "g = torch.tanh(g) * 0.5 + torch.exp(-g * g)"
RUN = """import torch
from model import Net

torch.set_num_threads(1)
compiled = torch.compile(Net().eval(), fullgraph=True)
x = torch.randn(512, 128)
with torch.no_grad():
    for _ in range(15):
        y = compiled(x)
print("ok", float(y.sum()))
"""


@pytest.fixture(scope="module")
def compiled_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("compiled_session")
    (folder / "model.py").write_text(MODEL)
    (folder / "run.py").write_text(RUN)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "session", "run", "--json", "-n", "3",
         "-o", str(folder / "traces"), "run.py"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, json.loads(done.stdout)


def test_the_answer_is_the_compiled_code_whose_kernel_holds_the_time(
    compiled_session: tuple[Path, dict[str, Any]],
) -> None:
    folder, document = compiled_session
    answer = document["answer"]
    assert answer["measured_by"] == "compiled kernels", answer
    assert Path(answer["file"]) == (folder / "model.py").resolve()
    assert answer["function"] == "model:Net.forward"
    slow = MODEL.splitlines().index(f"            {SLOW_LINE}") + 1
    first, last = answer["lines"]
    assert first <= slow <= last, answer
    assert answer["runs"] <= 2
    # the kernel Inductor generated from those lines, with its calls
    (kernel, *_) = answer["ops"]
    assert kernel["name"].startswith("graph_") and "cpp_fused" in kernel["name"]
    assert kernel["calls"] == 15 and kernel["ms"] > 0


def test_the_call_into_the_compiled_code_is_kept_and_compilation_is_setup(
    compiled_session: tuple[Path, dict[str, Any]],
) -> None:
    _, document = compiled_session
    answer = document["answer"]
    assert answer["compiled_from"]["statement"] == "y = compiled(x)"
    assert answer["setup_ms"]["compilation"] > 0
    discovery = document["iterations"][0]["discovery"]
    # running compiled code is steady-state work, not compilation
    assert discovery["hottest"][0]["statement"] == "y = compiled(x)"


@pytest.fixture(scope="module")
def extern_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    from tests.session.shapes import COMPILED_MODEL, COMPILED_RUN

    folder = tmp_path_factory.mktemp("extern_session")
    (folder / "model.py").write_text(COMPILED_MODEL)
    (folder / "run.py").write_text(COMPILED_RUN)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "session", "run", "-n", "2",
         "-o", str(folder / "traces"), "run.py"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    state = json.loads((folder / "traces" / "default" / "session.json").read_text())
    return done.stdout, state


def test_a_compiled_call_whose_time_is_in_extern_gemms_says_so(
    extern_session: tuple[str, dict[str, Any]],
) -> None:
    from tests.session.shapes import COMPILED_RUN, hot_line

    stdout, state = extern_session
    answers = [record["answer"] for record in state["iterations"]]
    # the discovery run already names the call that ran the compiled code, not a neighbour
    assert [answer["lines"][0] for answer in answers] == [hot_line(COMPILED_RUN)] * 2
    final = answers[-1]
    assert final["compiled_from"] is None and final["compiled_kernels_share"] < 0.5
    extern = {kernel["name"]: kernel["share"] for kernel in final["extern_kernels"]}
    assert extern.get("aten::addmm", 0) > 0.5, extern
    answer_line = next(line for line in stdout.splitlines() if line.startswith("answer:"))
    assert "so the answer stays at the call" in answer_line
    assert "extern kernels: aten::addmm" in answer_line

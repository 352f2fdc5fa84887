"""``ncompass run LAUNCHER ...``: a Python entry point on PATH (torchrun) runs as it would alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TRAIN = """\
import torch
import torch.distributed as dist

from steps import step

dist.init_process_group("gloo")
x = torch.ones(64, 64)
for _ in range(3):
    total = step(x)
    dist.all_reduce(total)
dist.destroy_process_group()
"""

SPEC = """\
version: 1
targets:
  - module: steps
    functions:
      - qualname: step
        name: train.step
"""


def _ncompass(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        # the environment's own launchers first, as in an activated environment
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    command = [sys.executable, "-m", "ncompass", "run", *args]
    return subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )


@pytest.mark.slow
def test_torchrun_on_path_runs_its_ranks_under_the_spec(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "steps.py").write_text("def step(x):\n    return (x @ x).sum()\n")
    (tmp_path / "spec.yaml").write_text(SPEC)
    done = _ncompass(
        tmp_path, "--config", "spec.yaml", "--output-dir", "out", "--trace-name", "t",
        "torchrun", "--nproc-per-node", "2", "train.py",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trace = json.loads((tmp_path / "out" / "t.json").read_text())
    roles = [process["role"] for process in trace["ncompass_processes"]]
    assert sorted(roles[1:]) == ["rank 0", "rank 1"], roles  # in the order they started
    steps = [event for event in trace["traceEvents"] if event.get("name") == "train.step"]
    assert len(steps) == 6  # 3 per rank


def test_a_bare_name_on_path_that_is_not_python_is_refused_in_one_line(tmp_path: Path) -> None:
    done = _ncompass(tmp_path, "--profiler", "none", "ls", "-l")
    assert done.returncode == 2
    assert "ls: no such script (" in done.stderr and "is not a Python script" in done.stderr
    assert "Traceback" not in done.stderr

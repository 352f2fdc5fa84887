"""A/A comparisons of real runs on a machine kept busy by a CPU hog: no verdict says "real".

Six runs of one unchanged program are recorded under ``ncompass run --profiler torch`` while a
busy loop shares the CPU, pinned to the same core, so that the runs differ as runs on a busy
machine do (by several times, in a few entries). Every split of them into two runs against two
must then find no real change: two runs cannot show how far a third would be (docs/compare.md,
"Few runs"). And a gate between two programs that share no marker is refused in one line.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncompass.analysis.comparison import compare
from ncompass.cli import ncompass_cli

REPO = Path(__file__).resolve().parents[2]
RUNS = 6

PROGRAM = """
import torch

import step

x = torch.randn(96, 96)
for _ in range(12):
    step.layer(x)
"""

STEP = """
import torch


def layer(x):
    y = x
    for _ in range(8):
        y = torch.tanh(y @ x).clone().to(torch.float64).to(torch.float32)
    return y
"""

SPEC = """
version: 1
targets:
  - module: step
    functions:
      - qualname: layer
        name: step.layer
"""

HOG = "while True:\n    sum(i * i for i in range(1000))\n"


@pytest.fixture(scope="module")
def busy_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Six traces of the same program, recorded while a CPU hog shares its core."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("busy")
    for name, text in (("prog.py", PROGRAM), ("step.py", STEP), ("spec.yaml", SPEC)):
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    core = {min(os.sched_getaffinity(0))}
    hog = subprocess.Popen(
        [sys.executable, "-c", HOG], preexec_fn=lambda: os.sched_setaffinity(0, core)
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(REPO)]))
    try:
        for run in range(RUNS):
            result = subprocess.run(
                [
                    *(sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"),
                    *("--profiler", "torch", "--trace-name", f"r{run}", "prog.py"),
                ],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                preexec_fn=lambda: os.sched_setaffinity(0, core),
            )
            assert result.returncode == 0, result.stderr
    finally:
        hog.kill()
        hog.wait()
    return [folder / "out" / f"r{run}.json" for run in range(RUNS)]


def test_two_runs_against_two_of_an_unchanged_program_find_nothing_real(
    busy_runs: list[Path],
) -> None:
    alarms = []
    for before in itertools.combinations(range(RUNS), 2):
        rest = [run for run in range(RUNS) if run not in before]
        for after in itertools.combinations(rest, 2):
            comparison = compare([busy_runs[i] for i in before], [busy_runs[i] for i in after])
            alarms += [
                (before, after, change.name)
                for change in [*comparison.overall, *comparison.changes()]
                if change.is_real
            ]
    assert alarms == []


def test_three_runs_a_side_call_real_only_what_clears_each_sides_spread(
    busy_runs: list[Path],
) -> None:
    comparison = compare(busy_runs[0::2], busy_runs[1::2])  # interleaved: a fair A/A split
    for change in [*comparison.overall, *comparison.changes()]:
        if change.is_real:
            interval = change.interval
            assert interval is not None and interval.span
            edge = max(1.0 + change.noise, interval.within)
            assert interval.low > edge or interval.high < 1.0 / edge
    markdown = comparison.to_markdown()
    assert "warning: 3 runs on a side" in markdown or "3 runs on a side" in markdown


def test_gate_between_programs_sharing_no_marker_is_refused(
    busy_runs: list[Path], tmp_path: Path
) -> None:
    other = tmp_path / "other.json"
    other.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "elsewhere", '
        '"pid": 1, "tid": 1, "ts": 0, "dur": 10}]}'
    )
    result = CliRunner().invoke(
        ncompass_cli, ["compare", str(busy_runs[0]), "--", str(other), "--fail-if-slower", "5%"]
    )
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "hold none of the markers" in lines[0]
    assert "Traceback" not in result.output

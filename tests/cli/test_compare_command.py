"""``ncompass compare`` end to end: traces recorded for real, a planted slowdown, the gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from tests.conftest import REPO
from tests.traces.builders import shared_trace

PLANTED_MODULE = """
import os
import time

EXTRA_S = float(os.environ.get("PLANTED_EXTRA_S", "0"))


def planted_step(x):
    time.sleep(0.010 + EXTRA_S)
    return x + 1


def steady_step(x):
    time.sleep(0.002)
    return x * 2
"""
PLANTED_SCRIPT = """
import torch

import plantedmod

torch.set_num_threads(1)
x = torch.ones(8, 8)
for _ in range(60):
    plantedmod.planted_step(x)
    plantedmod.steady_step(x)
"""
PLANTED_SPEC = """
version: 1
name: planted
targets:
  - module: plantedmod
    functions:
      - qualname: planted_step
        name: planted
      - qualname: steady_step
        name: steady
"""


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(ncompass_cli, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def planted_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two real runs under `ncompass run --profiler torch`; the second sleeps 10 ms (twice as
    long) in every call of the `planted` marker: a slowdown that sleep overshoot on a loaded
    machine (a few ms per call, at random) cannot hide, as it hid a 3 ms one. They run side by side, so that both see
    the same machine load (recorded one after the other on a loaded machine, every call of
    the second run was twice as slow, `steady` included)."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("planted")
    (folder / "plantedmod.py").write_text(PLANTED_MODULE)
    (folder / "planted_script.py").write_text(PLANTED_SCRIPT)
    (folder / "planted.yaml").write_text(PLANTED_SPEC)
    recordings = []
    for name, extra in (("before", "0"), ("after", "0.010")):
        env = {**os.environ, "PLANTED_EXTRA_S": extra, "PYTHONPATH": f"{REPO}{os.pathsep}{folder}"}
        command = [
            sys.executable, "-m", "ncompass", "run", "--profiler", "torch",
            "--config", str(folder / "planted.yaml"), "--output-dir", str(folder),
            "--trace-name", name, str(folder / "planted_script.py"),
        ]  # fmt: skip
        recordings.append(
            subprocess.Popen(
                command,
                cwd=folder,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        )
    for recording in recordings:
        _, stderr = recording.communicate(timeout=300)
        assert recording.returncode == 0, stderr
    return folder / "before.json", folder / "after.json"


def test_planted_slowdown_is_found_and_trips_the_marker_gate(
    planted_pair: tuple[Path, Path],
) -> None:
    before, after = planted_pair
    code, out, err = run(
        "compare", before, "--json", "--", after, "--fail-if-slower", "5%", "--marker", "planted"
    )
    assert code == 1, err
    values = json.loads(out)
    planted = next(row for row in values["markers"] if row["name"] == "planted")
    assert planted["verdict"] == "slower"
    assert planted["ratio"] > 1.1
    assert planted["interval"][0] > 1.05
    assert values["gate"]["failed"] is True
    assert "gate FAILED: marker 'planted'" in err
    assert "planted" in [row["name"] for row in values["biggest_changes"]]


def test_identical_pair_passes_the_gate(planted_pair: tuple[Path, Path]) -> None:
    before, _ = planted_pair
    code, out, err = run(
        "compare", before, "--", before, "--fail-if-slower", "5%", "--marker", "planted"
    )
    assert code == 0, err
    assert "gate passed" in err
    assert "| `planted` |" in out and "| same |" in out
    code, _, err = run("compare", before, "--", before, "--fail-if-slower", "5%")
    assert code == 0, err


def test_markdown_answers_overall_first_and_html_is_written(
    planted_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    before, after = planted_pair
    page = tmp_path / "compare.html"
    # three runs before: two cannot show how far their runs spread, so call nothing real
    code, out, err = run("compare", before, before, before, "--", after, "--html", page)
    assert code == 0, err
    assert out.startswith("# Comparison: 3 traces before, 1 trace after")
    assert "**run time**" in out and "1. marker `planted`" in out
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_options_before_the_separator_and_several_traces_after() -> None:
    trace = shared_trace("cpu_only")
    code, out, err = run("compare", "--top", "3", trace, "--", trace, trace, "--json")
    assert code == 0, err
    values = json.loads(out)
    assert values["before"] == [str(trace)] and values["after"] == [str(trace)] * 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a.json", "b.json"], "separate the two sides with --"),
        (["{trace}", "--", "missing.json"], "missing.json"),
        (["{trace}", "--", "{trace}", "--fail-if-slower", "lots"], "percentage"),
        (["{trace}", "--", "{trace}", "--fail-if-slower", "5%", "--marker", "nope"], "nope"),
        (["{trace}", "--", "{trace}", "--marker", "x"], "--marker only applies"),
        (["--", "{trace}"], "at least one trace on each side"),
    ],
)
def test_user_errors_exit_2(args: list[str], message: str) -> None:
    trace = str(shared_trace("cpu_only"))
    code, _, err = run("compare", *[arg.format(trace=trace) for arg in args])
    assert code == 2
    assert message in err

"""``ncompass compare`` on the same program recorded twice: two real `ncompass run` recordings
of one deterministic CPU workload must come out "same" everywhere and pass the gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from tests.conftest import REPO

WORK_MODULE = """
import torch


def matmuls(x):
    for _ in range(20):
        x = torch.tanh(x @ x)
    return x


def adds(x):
    y = x
    for _ in range(200):
        y = y + x
    return y


def reduce(x):
    return sum(float(x[i].sum()) for i in range(x.shape[0]))
"""
WORK_SCRIPT = """
import os
import pathlib
import time

import torch

import workmod

torch.manual_seed(0)
torch.set_num_threads(1)
x = torch.rand(64, 64) / 64
# start the measured loop together with the other recording (see `recorded_twice`)
here = pathlib.Path(__file__).parent
(here / ("ready-" + os.environ["RECORDING"])).touch()
deadline = time.monotonic() + 120
while len(list(here.glob("ready-*"))) < 2 and time.monotonic() < deadline:
    time.sleep(0.001)
for _ in range(40):
    workmod.matmuls(x)
    workmod.adds(x)
    workmod.reduce(x)
"""
WORK_SPEC = """
version: 1
name: work
targets:
  - module: workmod
    functions:
      - qualname: matmuls
        name: matmuls
      - qualname: adds
        name: adds
      - qualname: reduce
        name: reduce
"""
MARKERS = ("matmuls", "adds", "reduce")


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(ncompass_cli, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def recorded_twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same script recorded twice, each time in a fresh `ncompass run` process.

    The two recordings run side by side and start their measured loop together (each waits
    for the other at a file barrier), so that both see the same machine: on a shared machine
    the load changes from one minute to the next, and a run made while four other processes
    compete for the cores, or while its sibling is still importing torch, is slower in every
    call, which is a real difference the comparison must not hide (docs/compare.md, "Is it
    real?").
    """
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("twice")
    (folder / "workmod.py").write_text(WORK_MODULE)
    (folder / "work.py").write_text(WORK_SCRIPT)
    (folder / "work.yaml").write_text(WORK_SPEC)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{folder}"}
    recordings = [_record(folder, name, {**env, "RECORDING": name}) for name in ("first", "second")]
    for recording in recordings:
        _, stderr = recording.communicate(timeout=300)
        assert recording.returncode == 0, stderr
    return folder / "first.json", folder / "second.json"


def _record(folder: Path, name: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start `ncompass run` of the workload, writing FOLDER/NAME.json."""
    return subprocess.Popen(
        [sys.executable, "-m", "ncompass", "run", "--profiler", "torch",
         "--config", str(folder / "work.yaml"), "--output-dir", str(folder),
         "--trace-name", name, str(folder / "work.py")],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def document(recorded_twice: tuple[Path, Path]) -> dict[str, Any]:
    first, second = recorded_twice
    code, out, err = run("compare", first, "--", second, "--json")
    assert code == 0, err
    values: dict[str, Any] = json.loads(out)
    return values


def test_the_same_program_twice_is_same_everywhere(document: dict[str, Any]) -> None:
    [run_time] = document["overall"]  # no GPU work: no GPU busy time
    assert run_time["verdict"] == "unknown"  # one trace a side: no interval
    assert document["biggest_changes"] == []
    entries = [*document["markers"], *document["cpu_ops"]]
    markers = {entry["name"]: entry for entry in document["markers"]}
    assert set(MARKERS) <= set(markers)
    assert all(markers[name]["interval"] is not None for name in MARKERS)
    wrong = [
        (entry["name"], entry["ratio"], entry["interval"], entry["verdict"])
        for entry in entries
        if entry["verdict"] != ("same" if entry["interval"] else "unknown")
    ]
    assert not wrong, wrong


def test_the_same_program_twice_passes_the_gate(recorded_twice: tuple[Path, Path]) -> None:
    first, second = recorded_twice
    code, out, err = run("compare", first, "--", second, "--fail-if-slower", "5%")
    assert code == 0, err
    assert "gate passed: run time" in err
    assert "No real change in any entry." in out
    for name in MARKERS:
        code, _, err = run(
            "compare", first, "--", second, "--fail-if-slower", "5%", "--marker", name
        )
        assert code == 0, err
        assert f"gate passed: marker '{name}'" in err


def test_a_narrow_noise_band_is_the_users_choice(recorded_twice: tuple[Path, Path]) -> None:
    """--noise 0% restores the bare interval rule; the verdicts still agree with the ratios."""
    first, second = recorded_twice
    code, out, err = run("compare", first, "--", second, "--json", "--noise", "0%")
    assert code == 0, err
    values = json.loads(out)
    assert values["noise"] == 0.0
    for entry in values["markers"]:
        if entry["verdict"] == "slower":
            assert entry["interval"][0] > 1.0
        elif entry["verdict"] == "faster":
            assert entry["interval"][1] < 1.0
    code, _, err = run("compare", first, "--", second, "--noise", "lots")
    assert code == 2 and "--noise 'lots'" in err


def test_a_glob_over_the_run_folder_skips_the_marker_manifests(
    recorded_twice: tuple[Path, Path],
) -> None:
    """`base-*.json` also matches `ncompass run`'s NAME.ncompass.json: the CI recipe's glob."""
    first, second = recorded_twice
    manifest = first.with_name("first.ncompass.json")
    assert manifest.is_file()
    code, out, err = run("compare", first, manifest, "--", second, "--json")
    assert code == 0, err
    assert "skipped first.ncompass.json: marker manifests, not traces" in err
    assert json.loads(out)["before"] == [str(first)]

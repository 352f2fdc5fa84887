"""`ncompass compare` on a real kernel swap: the demo recorded before and after
configs/swap_linear.yaml (the Triton GEMM in the interpreter, as on a CPU-only machine).
The comparison must show the swapped kernel as new, PyTorch's linear as vanished, and the
interpreted kernel's markers as really slower (the interpreter runs Triton in numpy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

DEMO = ["examples/tiny_transformer.py", "--new-tokens", "2"]


def _ncompass(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def swap_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("swap")
    before = _ncompass(
        "run", "--config", "configs/mlp.yaml", "-o", str(folder), "--trace-name", "before", *DEMO
    )
    assert before.returncode == 0, before.stderr[-2000:]
    after = _ncompass(
        "run", "--config", "configs/mlp.yaml", "--config", "configs/swap_linear.yaml",
        "-o", str(folder), "--trace-name", "after", *DEMO,
        env={"TRITON_INTERPRET": "1"},
    )  # fmt: skip
    assert after.returncode == 0, after.stderr[-2000:]
    return folder / "before.json", folder / "after.json"


def _entries(document: dict[str, Any], table: str) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in document[table]}


def test_the_swap_shows_new_and_vanished_entries_and_real_slowdowns(
    swap_pair: tuple[Path, Path],
) -> None:
    before, after = swap_pair
    done = _ncompass("compare", str(before), "--", str(after), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    markers = _entries(document, "markers")
    assert markers["ncompass.kernels.linear[triton]"]["verdict"] == "new"
    cpu_ops = _entries(document, "cpu_ops")
    assert cpu_ops["aten::addmm"]["verdict"] == "vanished"
    mlp = markers["mlp.forward"]
    assert mlp["verdict"] == "slower" and mlp["interval"][0] > 1, mlp
    assert document["biggest_changes"], document


def test_the_gate_trips_on_the_interpreted_kernel(swap_pair: tuple[Path, Path]) -> None:
    before, after = swap_pair
    done = _ncompass(
        "compare",
        str(before),
        "--",
        str(after),
        "--fail-if-slower",
        "5%",
        "--marker",
        "mlp.forward",
    )
    assert done.returncode == 1, done.stderr
    assert "mlp.forward" in done.stderr

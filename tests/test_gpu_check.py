"""``benchmarks/gpu_check.py`` (``make gpu-check``): every check skipped, with its reason, where
there is no CUDA; and each check's own code path run on the CPU, so that the command still
works the day it meets a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

GPU_CHECK = REPO / "benchmarks" / "gpu_check.py"
CHECKS = (
    "transformers-run",
    "compiled",
    "nvtx",
    "gpu-monitor",
    "kernels",
    "process-tree",
    "roofline",
)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="a CUDA device is here: `make gpu-check` runs the checks"
)


def _gpu_check(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    rows = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(GPU_CHECK), "--json", str(rows), *options],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return done, json.loads(rows.read_text()) if rows.exists() else {}


def test_without_cuda_every_check_is_skipped_with_its_reason(tmp_path: Path) -> None:
    done, document = _gpu_check(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [row["name"] for row in document["checks"]] == list(CHECKS)
    for row in document["checks"]:
        assert row["status"] == "skipped"
        assert row["detail"].startswith("needs CUDA: torch ")
    assert "every check is skipped" in done.stdout
    assert "7 checks in" in done.stdout and "7 skipped" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", CHECKS)
def test_each_check_runs_its_path_on_the_cpu(tmp_path: Path, name: str) -> None:
    done, document = _gpu_check(tmp_path, "--exercise-on-cpu", "--only", name)
    [row] = document["checks"]
    assert row["status"] == "exercised", row  # "holds" is for a GPU only
    assert row["figure"], row
    assert done.returncode == 0, done.stdout + done.stderr

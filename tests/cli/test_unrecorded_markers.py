"""`context: nvtx` markers under `--profiler torch`: they fire into NVTX, which the torch
profiler does not record; `ncompass run` warns and `ncompass summarize` says why and what to do."""

from __future__ import annotations

import json
import subprocess
import sys
from html import escape
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from ncompass.traces.unrecorded_markers import unrecorded_markers

MODEL = """\
import torch


def step(x):
    return torch.relu(x @ x).sum()
"""
MAIN = """\
import torch
from tiny_model import step

x = torch.randn(32, 32)
for _ in range(3):
    step(x)
"""
SPEC = """\
version: 1
targets:
  - module: tiny_model
    functions:
      - qualname: step
        context: nvtx
"""
ADVICE = (
    "1 marker (`tiny_model:step`) uses `context: nvtx`: its ranges went to NVTX, which "
    "`--profiler torch` does not record. To see them, run with `--profiler nvtx-trace` or "
    "`--nsys`, or give it `context: torch+nvtx`."
)


@pytest.fixture(scope="module")
def nvtx_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real `ncompass run --profiler torch` of a script whose one marker is NVTX-only."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("nvtx_run")
    (folder / "tiny_model.py").write_text(MODEL)
    (folder / "main.py").write_text(MAIN)
    (folder / "spec.yaml").write_text(SPEC)
    command = ["run", "--profiler", "torch", "-c", "spec.yaml", "-o", "traces"]
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", *command, "--trace-name", "run", "main.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return folder / "traces" / "run.json", done.stderr


def test_run_warns_that_nvtx_markers_are_not_in_a_torch_trace(nvtx_run: tuple[Path, str]) -> None:
    _, stderr = nvtx_run
    assert f"ncompass: warning: {ADVICE}" in stderr
    assert "1 marker placed" in stderr


def test_summarize_says_where_the_markers_went_and_how_to_record_them(
    nvtx_run: tuple[Path, str], tmp_path: Path
) -> None:
    trace, _ = nvtx_run
    page = tmp_path / "summary.html"
    command = ["summarize", str(trace), "--json", "--html", str(page)]
    result = CliRunner().invoke(ncompass_cli, command)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    info = summary["structured"]["trace"]
    assert info["markers"] == 0
    assert info["unrecorded_markers"] == {
        "profiler": "torch",
        "context": "nvtx",
        "markers": ["tiny_model:step"],
    }
    assert "0 marker ranges" in summary["markdown"]
    assert ADVICE in summary["markdown"]
    assert escape(ADVICE) in page.read_text()


def test_summarize_without_a_sidecar_says_nothing_of_nvtx(
    nvtx_run: tuple[Path, str], tmp_path: Path
) -> None:
    trace, _ = nvtx_run
    alone = tmp_path / "run.json"
    alone.write_bytes(trace.read_bytes())
    result = CliRunner().invoke(ncompass_cli, ["summarize", str(alone), "--json"])
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert "unrecorded_markers" not in summary["structured"]["trace"]
    assert "NVTX" not in summary["markdown"]


@pytest.mark.parametrize(
    ("profiler", "nsys", "context"),
    [
        ("nvtx-trace", False, "nvtx"),  # the NVTX recorder records them
        ("torch", True, "nvtx"),  # so does Nsight Systems
        ("torch", False, "torch+nvtx"),  # the torch half records
    ],
)
def test_markers_a_profiler_records_are_not_flagged(
    profiler: str, nsys: bool, context: str
) -> None:
    markers = [{"name": "m", "context": context}]
    assert unrecorded_markers(profiler, markers, nsys=nsys) is None

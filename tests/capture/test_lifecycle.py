"""The one profiled-run lifecycle (``profiled``) and the one ``ncompass run`` command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ncompass import environment_variables
from ncompass.capture.backends.torch import TorchProfiler
from ncompass.capture.lifecycle import profiled
from ncompass.capture.run_options import run_command
from ncompass.spec.models import RewriteConfig
from ncompass.traces.reader import TraceReader


def test_profiled_writes_the_trace_and_sets_the_run_environment(tmp_path: Path) -> None:
    import torch

    profiler = TorchProfiler(tmp_path / "run.json")
    with profiled(profiler, RewriteConfig(full_trace_mode=True), tmp_path, runner=True) as run:
        assert os.environ[environment_variables.NCOMPASS_PROFILE] == "1"
        assert os.environ[environment_variables.NCOMPASS_TRACE_DIR] == str(tmp_path)
        assert os.environ[environment_variables.NCOMPASS_RUNNER] == "1"
        torch.ones(8) @ torch.ones(8)
    assert environment_variables.NCOMPASS_RUNNER not in os.environ
    assert run.written == tmp_path / "run.json"
    names = {event.get("name") for event in TraceReader(run.written, progress=False)}
    assert "ncompass.full_trace" in names


def test_profiled_stops_the_profiler_when_the_code_raises(tmp_path: Path) -> None:
    profiler = TorchProfiler(tmp_path / "raised.json")
    with pytest.raises(ZeroDivisionError), profiled(profiler, RewriteConfig(), tmp_path) as run:
        _ = 1 / 0
    assert run.written is not None and run.written.stat().st_size > 0
    assert TorchProfiler.active() is None


def test_run_command_repeats_a_run_in_a_fresh_process(tmp_path: Path) -> None:
    command = run_command(
        ["a.yaml", Path("b.yaml")],
        output_dir=tmp_path,
        trace_name="t",
        script="-odd.py",
        args=["--steps", "2"],
        profiler="nvtx-trace",
        full_trace=True,
        options=["--child-report", "r.json"],
    )
    assert command[:4] == [sys.executable, "-m", "ncompass", "run"]
    assert command[4:] == [
        "--profiler", "nvtx-trace", "--child-report", "r.json",
        "--output-dir", str(tmp_path), "--trace-name", "t",
        "--config", "a.yaml", "--config", "b.yaml", "--full-trace",
        f".{os.sep}-odd.py", "--steps", "2",
    ]  # fmt: skip
    module_run = run_command([], output_dir=tmp_path, trace_name="t", module="pkg.main")
    assert module_run[-2:] == ["-m", "pkg.main"] and "--profiler" not in module_run
    discovery = run_command(
        ["s.yaml"], output_dir=tmp_path, trace_name="t", script="x.py",
        entry="ncompass.session.discovery",
    )  # fmt: skip
    assert discovery[:3] == [sys.executable, "-m", "ncompass.session.discovery"]
    assert discovery[3] == "--output-dir"

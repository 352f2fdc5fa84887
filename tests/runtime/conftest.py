"""Fixtures for the range-context tests: the NVTX recorder and a child-process runner."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from ncompass.capture.nvtx_recorder import (
    NvtxRecording,
    build_recorder,
    environment,
    find_compiler,
    read_recordings,
)
from ncompass.errors import CaptureError

RunRecorded = Callable[[str], list[NvtxRecording]]


@pytest.fixture(scope="session")
def nvtx_recorder_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorder compiled into a temporary cache; skips when there is no C compiler."""
    if find_compiler() is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH: cannot build the NVTX recorder")
    try:
        return build_recorder(tmp_path_factory.mktemp("nvtx-cache"))
    except CaptureError as error:
        pytest.skip(f"the NVTX recorder does not build here: {error}")


@pytest.fixture
def run_recorded(nvtx_recorder_library: Path, tmp_path: Path) -> RunRecorded:
    """Runs Python source in a child process with the recorder attached; returns recordings."""

    def run(source: str) -> list[NvtxRecording]:
        script = tmp_path / "child.py"
        script.write_text(textwrap.dedent(source))
        output_dir = tmp_path / "nvtx"
        env = {**os.environ, **environment(output_dir, library=nvtx_recorder_library)}
        result = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        return read_recordings(output_dir)

    return run

"""Fixtures for the kernel tests: Triton's interpreter, a private autotune cache, clean counts.

In this process the kernels run in Triton's interpreter (there is no GPU here): the
``interpreter`` fixture sets ``TRITON_INTERPRET=1`` before the first kernel module is imported,
which fixes the mode for the process. Behaviour without the interpreter (or without triton) is
tested in subprocesses, where the environment is ours to choose.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ncompass.kernels.autotune.tuner import reset_autotuner
from ncompass.kernels.stats import reset_stats

REPO = Path(__file__).resolve().parents[2]

HAS_TRITON = importlib.util.find_spec("triton") is not None


@pytest.fixture(autouse=True)
def kernel_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private autotune cache, tuning off unless a test turns it on, counts reset."""
    cache = tmp_path / "autotune"
    monkeypatch.setenv("NCOMPASS_AUTOTUNE_DIR", str(cache))
    monkeypatch.setenv("NCOMPASS_AUTOTUNE", "0")
    reset_autotuner()
    reset_stats()
    yield cache
    reset_autotuner()
    if "ncompass.kernels.patching" in sys.modules:
        sys.modules["ncompass.kernels.patching"].unpatch()


@pytest.fixture
def interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels run in Triton's interpreter (skips when triton or numpy is missing)."""
    if not HAS_TRITON:
        pytest.skip("triton is not installed (pip install -e '.[kernels]')")
    pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for name in ("gemm", "conv2d", "norm"):
        module = sys.modules.get(f"ncompass.kernels.jit.{name}")
        assert module is None or module.INTERPRETED, "kernels were loaded outside the interpreter"


@pytest.fixture
def tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    """The autotuner measures on a cache miss."""
    monkeypatch.setenv("NCOMPASS_AUTOTUNE", "1")
    reset_autotuner()


def run_python(
    code: str, env: dict[str, str], *, timeout: float = 240, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with ``env`` on top of a clean environment.

    ``TRITON_INTERPRET`` and the ncompass variables of this process are not inherited: the
    child sees only what ``env`` says.
    """
    base = {
        key: value
        for key, value in os.environ.items()
        if key != "TRITON_INTERPRET" and not key.startswith("NCOMPASS_")
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"child failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done

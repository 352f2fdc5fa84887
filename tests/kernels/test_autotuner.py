"""The autotuner for real, in Triton's interpreter with the CPU timer: it measures the
candidates and picks the fastest, caches the choice, reuses it in later processes, recovers
from a corrupt cache, and concurrent processes keep each other's choices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from ncompass.kernels import execute, ops
from ncompass.kernels.autotune.cache import (
    AutotuneCacheWarning,
    CachedChoice,
    TuningCache,
    UnusableCachedChoice,
)
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.timing import CpuTimer
from ncompass.kernels.autotune.tuner import Autotuner, autotuner
from ncompass.kernels.problems import GemmProblem
from ncompass.kernels.shapes import parse_shape
from ncompass.kernels.stats import stats
from ncompass.kernels.tuning import tune_shape
from tests.kernels.conftest import REPO, run_python

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("interpreter", "tuning")]

SMALL = KernelConfig.of(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1)
LARGE = KernelConfig.of(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=1)


def _gemm_launch(size: int = 64) -> execute.KernelLaunch:
    problem = GemmProblem(size, size, size, "float32")
    a, b = torch.randn(size, size), torch.randn(size, size)
    return execute.gemm_launch(problem, a, b, None)


def test_picks_the_fastest_candidate_and_stores_it(tmp_path: Path) -> None:
    # in the interpreter one 64x64 tile is one program; 16x16 tiles are 64 programs
    tuner = Autotuner(TuningCache(tmp_path))
    launch = _gemm_launch()
    choice = tuner.choose(launch.key(), lambda: [SMALL, LARGE], launch.launch, CpuTimer())
    assert choice.origin == "tuned" and choice.config == LARGE and choice.ms is not None
    stored = TuningCache(tmp_path).lookup(launch.key())
    assert stored is not None and stored.config == LARGE
    assert stored.candidates == 2 and stored.timer == "cpu" and stored.ms == choice.ms
    again = tuner.choose(launch.key(), lambda: [SMALL, LARGE], launch.launch, CpuTimer())
    assert again.origin == "memo" and again.config == LARGE


def test_force_measures_again(tmp_path: Path) -> None:
    tuner = Autotuner(TuningCache(tmp_path))
    launch = _gemm_launch(32)
    tuner.choose(launch.key(), lambda: [SMALL], launch.launch, CpuTimer(warmup=0, repeat=1))
    forced = tuner.choose(launch.key(), lambda: [SMALL], launch.launch, CpuTimer(warmup=0, repeat=1), force=True)  # fmt: skip
    assert forced.origin == "tuned" and tuner.origins() == {"tuned": 2}


def test_failing_candidates_are_skipped_and_all_failing_raises(tmp_path: Path) -> None:
    tuner = Autotuner(TuningCache(tmp_path))
    launch = _gemm_launch(32)

    def run(config: KernelConfig) -> None:
        if config == SMALL:  # as a GPU compile failure (out of shared memory) would
            raise RuntimeError("out of resources")
        launch.launch(config)

    choice = tuner.choose(launch.key(), lambda: [SMALL, LARGE], run, CpuTimer(warmup=0, repeat=1))
    assert choice.config == LARGE
    with pytest.raises(RuntimeError, match="out of resources"):
        tuner.choose(launch.key(), lambda: [SMALL], run, CpuTimer(), force=True)


def test_an_op_tunes_on_its_first_call_only(kernel_environment: Path) -> None:
    with torch.no_grad():
        for _ in range(3):
            ops.linear(torch.randn(20, 48), torch.randn(24, 48))
    assert autotuner().origins() == {"tuned": 1, "memo": 2}
    (cached,) = TuningCache(kernel_environment).files()
    (entry,) = cached.entries.values()
    assert cached.kernel == "gemm" and cached.device.capability == "interpreter"
    assert entry.timer == "cpu" and entry.candidates >= 2


def test_tuning_off_uses_the_default_without_measuring(
    kernel_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCOMPASS_AUTOTUNE", "0")
    with torch.no_grad():
        ops.linear(torch.randn(20, 48), torch.randn(24, 48))
    assert autotuner().origins() == {"default": 1}
    assert not kernel_environment.exists()


CHILD = """
import json, sys, torch
from ncompass.kernels import ops
from ncompass.kernels.autotune import autotuner
rows = int(sys.argv[1]) if len(sys.argv) > 1 else 40
with torch.no_grad():
    out = ops.linear(torch.randn(rows, 64), torch.randn(48, 64), torch.randn(48))
(choice,) = autotuner().remembered().values()
print(json.dumps({"origins": autotuner().origins(), "config": choice.config.to_json()}))
"""


def _child(cache: Path) -> dict[str, object]:
    env = {"TRITON_INTERPRET": "1", "NCOMPASS_AUTOTUNE_DIR": str(cache)}
    done = run_python(CHILD, env)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_a_choice_persists_across_processes(tmp_path: Path) -> None:
    first = _child(tmp_path)
    second = _child(tmp_path)
    assert first["origins"] == {"tuned": 1}
    assert second["origins"] == {"cache": 1}
    assert second["config"] == first["config"]


def test_a_corrupt_cache_is_recovered_by_the_next_process(tmp_path: Path) -> None:
    _child(tmp_path)
    (path,) = tmp_path.glob("gemm-*.json")
    path.write_bytes(b"\x00\x01 not json")
    env = {"TRITON_INTERPRET": "1", "NCOMPASS_AUTOTUNE_DIR": str(tmp_path)}
    done = run_python(CHILD, env)
    assert json.loads(done.stdout.splitlines()[-1])["origins"] == {"tuned": 1}
    assert done.stderr.count("AutotuneCacheWarning") == 1  # one problem, one warning
    assert "is corrupt" in done.stderr and "tuning again" in done.stderr
    assert (tmp_path / (path.name + ".corrupt")).exists()
    assert _child(tmp_path)["origins"] == {"cache": 1}


def test_concurrent_processes_tuning_different_shapes_keep_every_choice(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {
        "PYTHONPATH": str(REPO),
        "TRITON_INTERPRET": "1",
        "NCOMPASS_AUTOTUNE_DIR": str(tmp_path / "cache"),
    }
    children = [
        subprocess.Popen(
            [sys.executable, str(script), str(rows)],
            env={**os.environ, **env, "NCOMPASS_AUTOTUNE": "1"},
            stdout=subprocess.PIPE,
            text=True,
        )
        for rows in (3, 40, 200)  # three shape buckets: m4, m64, m256
    ]
    outputs = [child.communicate(timeout=240)[0] for child in children]
    assert all(child.returncode == 0 for child in children)
    assert all(json.loads(out.splitlines()[-1])["origins"] == {"tuned": 1} for out in outputs)
    (cached,) = TuningCache(tmp_path / "cache").files()
    assert sorted(cached.entries) == [
        "float32/m256-n64-k64",
        "float32/m4-n64-k64",
        "float32/m64-n64-k64",
    ]


def test_a_cached_choice_outside_the_search_space_runs_pytorch_with_one_warning(
    kernel_environment: Path,
) -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    key = execute.gemm_launch(GemmProblem(4, 4, 4, "float32"), a, b, None).key()
    impossible = KernelConfig.of(BLOCK_M=65, BLOCK_N=16, BLOCK_K=16, GROUP_M=1)
    cache = TuningCache(kernel_environment)
    cache.store(key, CachedChoice(impossible, 0.1, 4, "cpu"))  # valid JSON, as a hand edit
    with warnings.catch_warnings(record=True) as noticed, torch.no_grad():
        warnings.simplefilter("always")
        outputs = [ops.matmul(a, b) for _ in range(3)]
    assert all(torch.allclose(out, a @ b) for out in outputs)
    (warning,) = [w for w in noticed if issubclass(w.category, AutotuneCacheWarning)]
    assert str(warning.message).startswith(f"{cache.path(key)}: entry 'float32/m4-n4-k4' is")
    assert "(BLOCK_M=65 is not one of 16, 32, 64, 128)" in str(warning.message)
    assert warning.filename == __file__  # points at the call, not inside ncompass
    matmul = stats()["matmul"]
    assert matmul.kernel_calls == 0 and matmul.fallbacks == {execute.UNUSABLE_CACHED_CHOICE: 3}
    with pytest.raises(UnusableCachedChoice), pytest.warns(AutotuneCacheWarning):
        TuningCache(kernel_environment).lookup(key)  # the entry stays until tuned again
    forced = tune_shape(parse_shape("matmul", "a=4x4,b=4x4"), "float32", force=True)
    assert forced.choice is not None and forced.choice.config != impossible
    with torch.no_grad():
        assert torch.allclose(ops.matmul(a, b), a @ b)
    assert stats()["matmul"].kernel_calls == 1

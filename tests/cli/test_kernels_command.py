"""``ncompass kernels list`` and ``ncompass kernels tune``: output, JSON, cache, user errors."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ncompass.cli._group import ncompass_cli
from ncompass.kernels.autotune.cache import CachedChoice, TuningCache, TuningKey
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.device import DeviceIdentity
from ncompass.kernels.autotune.tuner import reset_autotuner
from ncompass.kernels.catalog import kernel_source_hash


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private autotune cache; tuning on."""
    monkeypatch.setenv("NCOMPASS_AUTOTUNE_DIR", str(tmp_path / "autotune"))
    monkeypatch.setenv("NCOMPASS_AUTOTUNE", "1")
    reset_autotuner()
    yield tmp_path / "autotune"
    reset_autotuner()


@pytest.fixture
def interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install -e '.[kernels]')")
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def ncompass(*args: str) -> Result:
    return CliRunner().invoke(ncompass_cli, ["kernels", *args])


def test_kernels_is_a_registered_command() -> None:
    result = CliRunner().invoke(ncompass_cli, ["--help"])
    assert "kernels" in result.output and "Triton kernel ops" in result.output


def test_list_shows_ops_conditions_and_an_empty_cache(cache_dir: Path) -> None:
    result = ncompass("list")
    assert result.exit_code == 0
    assert "conv2d: 2-D convolution as an implicit GEMM" in result.output
    assert "needs: groups=1, dilation=1" in result.output
    assert "a CUDA device, or CPU tensors with TRITON_INTERPRET=1" in result.output
    assert f"cached choices ({cache_dir}):\n  none yet" in result.output


def test_list_shows_cached_choices_and_marks_stale_ones(cache_dir: Path) -> None:
    device = DeviceIdentity("NVIDIA A100-SXM4-80GB", "sm_80")
    choice = CachedChoice(KernelConfig.of(BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, GROUP_M=8), 0.41, 9, "cuda-events")  # fmt: skip
    cache = TuningCache(cache_dir)
    current = TuningKey(
        "gemm", kernel_source_hash("gemm"), "0.0-old", device, "float16", "m64-n64-k64"
    )
    cache.store(current, choice)
    result = ncompass("list")
    assert "gemm on NVIDIA A100-SXM4-80GB (sm_80), triton 0.0-old  [stale" in result.output
    assert "float16/m64-n64-k64" in result.output and "BLOCK_M=128" in result.output
    listing = json.loads(ncompass("list", "--json").output)
    (entry,) = listing["cached"]
    assert entry["current"] is False and entry["choices"]["float16/m64-n64-k64"]["ms"] == 0.41
    assert listing["cache_dir"] == str(cache_dir)


def test_list_names_a_cache_file_it_cannot_use(cache_dir: Path) -> None:
    cache_dir.mkdir(parents=True)
    torn = cache_dir / "gemm-000000000000-triton3.0.0-cpu-interpreter.json"
    torn.write_text('{"format": 1, "entr')
    result = ncompass("list")
    assert result.exit_code == 0
    assert f"  unusable: {torn} (corrupt: " in result.output
    assert "its ops tune again" in result.output
    listing = json.loads(ncompass("list", "--json").output)
    assert [item["file"] for item in listing["unusable"]] == [str(torn)]


def test_list_marks_a_cached_choice_outside_the_search_space(cache_dir: Path) -> None:
    device = DeviceIdentity("NVIDIA A100-SXM4-80GB", "sm_80")
    key = TuningKey("gemm", kernel_source_hash("gemm"), "3.9.0", device, "float16", "m64-n64-k64")
    impossible = KernelConfig.of(BLOCK_M=65, BLOCK_N=64, BLOCK_K=32, GROUP_M=8)
    TuningCache(cache_dir).store(key, CachedChoice(impossible, 0.41, 9, "cuda-events"))
    result = ncompass("list")
    assert result.exit_code == 0
    entry, mark = result.output.splitlines()[-2:]
    assert entry.lstrip().startswith("float16/m64-n64-k64") and "BLOCK_M=65" in entry
    assert mark.strip() == (
        "[unusable: outside the search space, BLOCK_M=65 is not one of 16, 32, 64, 128; its "
        "calls run PyTorch until `ncompass kernels tune --force` tunes that shape again]"
    )
    listing = json.loads(ncompass("list", "--json").output)
    (cached,) = listing["cached"]
    choice = cached["choices"]["float16/m64-n64-k64"]
    assert choice["unusable"] == "BLOCK_M=65 is not one of 16, 32, 64, 128"


@pytest.mark.slow
@pytest.mark.usefixtures("interpreter")
def test_tune_refuses_a_cached_choice_outside_the_search_space_until_forced(
    cache_dir: Path,
) -> None:
    assert ncompass("tune", "--op", "matmul", "--shapes", "a=4x4,b=4x4").exit_code == 0
    (path,) = cache_dir.glob("gemm-*.json")
    path.write_text(path.read_text().replace('"BLOCK_M": 16', '"BLOCK_M": 65'))
    reset_autotuner()  # as a new process would
    refused = ncompass("tune", "--op", "matmul", "--shapes", "a=4x4,b=4x4")
    assert refused.exit_code == 0, refused.output
    assert refused.output.splitlines()[0] == (
        "matmul float32 a=4x4,b=4x4: cached choice outside the search space "
        "(BLOCK_M=65 is not one of 16, 32, 64, 128; --force tunes it again)"
    )
    (warning,) = refused.stderr.splitlines()
    assert warning.startswith(f"warning: {path}: entry 'float32/m4-n4-k4' is outside the gemm")
    forced = ncompass("tune", "--op", "matmul", "--shapes", "a=4x4,b=4x4", "--force")
    assert forced.exit_code == 0 and "tuned now" in forced.output
    assert "unusable" not in ncompass("list").output


@pytest.mark.usefixtures("interpreter")
def test_an_unknown_activation_is_one_line_and_exit_2() -> None:
    result = ncompass("tune", "--op", "matmul", "--shapes", "a=4x4,b=4x4,activation=swish")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: matmul shape 'a=4x4,b=4x4,activation=swish': activation 'swish' is not one of "
        "none, relu, gelu, gelu_tanh, silu\n"
    )


@pytest.mark.slow
@pytest.mark.usefixtures("interpreter")
def test_tune_over_a_corrupt_cache_warns_in_one_line_and_recovers(cache_dir: Path) -> None:
    shape = "x=1x3x5x5,w=2x3x3x3"
    assert ncompass("tune", "--op", "conv2d", "--shapes", shape).exit_code == 0
    (path,) = cache_dir.glob("conv2d-*.json")
    path.write_text("{garbage")
    reset_autotuner()  # as a new process would
    result = ncompass("tune", "--op", "conv2d", "--shapes", shape)
    assert result.exit_code == 0, result.output
    assert "tuned now" in result.output
    (warning,) = result.stderr.splitlines()
    assert warning.startswith(f"warning: {path} is corrupt (")
    assert warning.endswith(f"tuning again (the next choice saved moves it aside to {path.name}.corrupt)")  # fmt: skip
    assert (cache_dir / f"{path.name}.corrupt").read_text() == "{garbage"
    assert "unusable" not in ncompass("list").output


@pytest.mark.slow
@pytest.mark.usefixtures("interpreter")
def test_tune_measures_then_reuses_the_cache(cache_dir: Path) -> None:
    shapes = "x=1x3x9x9,w=4x3x3x3,padding=1;x=2x3x9x9,w=4x3x3x3,stride=2"
    first = ncompass("tune", "--op", "conv2d", "--shapes", shapes, "--json")
    assert first.exit_code == 0, first.output
    report = json.loads(first.output)
    assert report["device"] == "cpu"
    assert [r["origin"] for r in report["results"]] == ["tuned", "tuned"]
    assert all(Path(r["cache_file"]).parent == cache_dir for r in report["results"])
    reset_autotuner()  # as a new process would
    again = ncompass("tune", "--op", "conv2d", "--shapes", "x=1x3x9x9,w=4x3x3x3,padding=1")
    assert again.exit_code == 0
    assert "conv2d float32 x=1x3x9x9,w=4x3x3x3,padding=1 on cpu: BLOCK_K=" in again.output
    assert "cached earlier" in again.output and f"cache: {cache_dir}" in again.output
    listing = ncompass("list").output
    assert "conv2d on " in listing and "(interpreter), triton" in listing


@pytest.mark.slow
@pytest.mark.usefixtures("interpreter")
def test_tune_a_preset_in_several_dtypes() -> None:
    result = ncompass("tune", "--op", "layer_norm", "--preset", "tinyformer", "--dtype", "float16", "--dtype", "bfloat16")  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("layer_norm float16 x=2x40x128 on cpu: BLOCK_M=")
    assert lines[1].startswith("layer_norm bfloat16 x=2x40x128 on cpu: BLOCK_M=")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["tune", "--op", "conv3d", "--shapes", "x=1"],
            "error: no kernel op 'conv3d'; choose one of conv2d",
        ),
        (
            ["tune", "--op", "linear"],
            "error: give --shapes (e.g. --shapes 'x=1x64x56x56,w=64x64x3x3') or --preset",
        ),
        (["tune", "--op", "linear", "--shapes", "x=8x8"], "error: linear shape 'x=8x8' lacks w"),
        (
            ["tune", "--op", "matmul", "--preset", "resnet50"],
            "error: preset 'resnet50' has no matmul shapes",
        ),
    ],
)
def test_user_mistakes_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = ncompass(*args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message or result.stderr.startswith(message)


def test_tune_without_a_gpu_or_the_interpreter_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed: the message is about installing it")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    result = ncompass("tune", "--op", "linear", "--shapes", "x=8x8,w=4x8")
    assert result.exit_code == 2
    assert "error: no CUDA device to tune on; set TRITON_INTERPRET=1" in result.stderr

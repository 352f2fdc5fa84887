"""The persistent autotune cache: keyed files, atomic writes, concurrent writers (real
processes), corrupt and unwritable files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ncompass.kernels.autotune.cache import (
    AutotuneCacheWarning,
    CachedChoice,
    TuningCache,
    TuningKey,
    default_cache_dir,
)
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.device import DeviceIdentity

A100 = DeviceIdentity("NVIDIA A100-SXM4-80GB", "sm_80")


def _key(bucket: str = "m64-n64-k64", **changes: object) -> TuningKey:
    fields: dict[str, object] = {
        "kernel": "gemm",
        "source_hash": "0123456789abcdef",
        "triton": "3.9.0",
        "device": A100,
        "dtype": "float16",
        "bucket": bucket,
    }
    return TuningKey(**(fields | changes))  # type: ignore[arg-type]


def _choice(block: int = 64, ms: float = 0.5) -> CachedChoice:
    config = KernelConfig.of(BLOCK_M=block, BLOCK_N=64, BLOCK_K=32, GROUP_M=8)
    return CachedChoice(config, ms, 8, "cuda-events")


def test_store_and_lookup_round_trip(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    assert cache.lookup(_key()) is None
    cache.store(_key(), _choice())
    assert cache.lookup(_key()) == _choice()
    assert TuningCache(tmp_path).lookup(_key()) == _choice()  # a new reader: from disk
    assert (
        cache.path(_key()).name == "gemm-0123456789ab-triton3.9.0-nvidia-a100-sxm4-80gb-sm_80.json"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"source_hash": "fedcba9876543210"},
        {"triton": "3.10.0"},
        {"device": DeviceIdentity("NVIDIA H100", "sm_90")},
        {"dtype": "bfloat16"},
        {"bucket": "m128-n64-k64"},
    ],
)
def test_every_part_of_the_key_separates_results(tmp_path: Path, change: dict[str, object]) -> None:
    cache = TuningCache(tmp_path)
    cache.store(_key(), _choice())
    assert cache.lookup(_key(**change)) is None


def test_file_is_readable_json_with_its_key(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    cache.store(_key(), _choice())
    document = json.loads(cache.path(_key()).read_text())
    assert document["kernel"] == "gemm" and document["triton"] == "3.9.0"
    assert document["device"] == {"name": "NVIDIA A100-SXM4-80GB", "capability": "sm_80"}
    assert document["entries"]["float16/m64-n64-k64"]["config"]["BLOCK_M"] == 64
    (listed,) = cache.files()
    assert listed.entries == {"float16/m64-n64-k64": _choice()}
    # no temporary files are left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        cache.path(_key()).name,
        cache.path(_key()).name + ".lock",
    ]


def test_corrupt_file_is_reported_moved_aside_and_rewritten(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    path = cache.path(_key())
    path.write_text('{"format": 1, "entries": {"float16/m64')  # a torn write of another tool
    with pytest.warns(AutotuneCacheWarning, match=r"is corrupt .* tuning again .*\.corrupt\)"):
        assert cache.lookup(_key()) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.store(_key(), _choice())  # reported once: moved aside without a second warning
    assert TuningCache(tmp_path).lookup(_key()) == _choice()
    assert (tmp_path / (path.name + ".corrupt")).read_text().startswith('{"format": 1')
    path.write_text("{")  # corrupted again, found first by a writer
    with pytest.warns(AutotuneCacheWarning, match="is corrupt .* moved aside to"):
        TuningCache(tmp_path).store(_key(), _choice())
    assert (tmp_path / (path.name + ".corrupt")).read_text() == "{"


def test_listing_reports_files_that_cannot_be_used(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    cache.store(_key(), _choice())
    torn = tmp_path / "gemm-000000000000-triton3.0.0-cpu-interpreter.json"
    torn.write_text('{"format": 1, "entr')
    files, damaged = cache.scan()
    assert [item.path for item in files] == [cache.path(_key())]
    assert [(path, reason.split(":")[0]) for path, reason in damaged] == [(torn, "corrupt")]


def test_file_of_another_format_is_treated_as_corrupt(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    cache.path(_key()).write_text(json.dumps({"format": 99, "entries": {}}))
    with pytest.warns(AutotuneCacheWarning):
        assert cache.lookup(_key()) is None


def test_invalid_entry_is_ignored_and_others_survive(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    cache.store(_key(), _choice())
    cache.store(_key("m1-n1-k1"), _choice(16))
    path = cache.path(_key())
    document = json.loads(path.read_text())
    document["entries"]["float16/m64-n64-k64"]["config"]["BLOCK_M"] = "big"
    path.write_text(json.dumps(document))
    with pytest.warns(AutotuneCacheWarning, match="is invalid"):
        assert TuningCache(tmp_path).lookup(_key()) is None
    assert TuningCache(tmp_path).lookup(_key("m1-n1-k1")) == _choice(16)


def test_unwritable_cache_warns_once_and_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # the cache folder cannot be created under a file (even by root)
    cache = TuningCache(blocker / "autotune")
    with pytest.warns(AutotuneCacheWarning, match="cannot write the autotune cache"):
        cache.store(_key(), _choice())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.store(_key("m1-n1-k1"), _choice())  # once is enough
    assert cache.lookup(_key()) is None


def test_default_location_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("NCOMPASS_AUTOTUNE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "ncompass" / "autotune"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / ".cache" / "ncompass" / "autotune"
    monkeypatch.setenv("NCOMPASS_AUTOTUNE_DIR", str(tmp_path / "override"))
    assert default_cache_dir() == tmp_path / "override"


WRITER = """
import sys
from pathlib import Path
from ncompass.kernels.autotune.cache import CachedChoice, TuningCache, TuningKey
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.device import DeviceIdentity

root, worker = Path(sys.argv[1]), int(sys.argv[2])
cache = TuningCache(root)
device = DeviceIdentity("NVIDIA A100-SXM4-80GB", "sm_80")
for i in range(25):
    key = TuningKey("gemm", "0123456789abcdef", "3.9.0", device, "float16", f"w{worker}-{i}")
    config = KernelConfig.of(BLOCK_M=16 << (i % 4), BLOCK_N=16, BLOCK_K=16, GROUP_M=1)
    cache.store(key, CachedChoice(config, float(i), 1, "cpu"))
"""


def test_concurrent_processes_keep_every_entry(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "cache"), str(n)], env=_child_env()
        )
        for n in range(4)
    ]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0, 0]
    (listed,) = TuningCache(tmp_path / "cache").files()
    assert len(listed.entries) == 100
    assert listed.entries["float16/w3-24"].ms == 24.0


def test_reading_while_another_process_writes_never_sees_a_torn_file(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    root = tmp_path / "cache"
    writer = subprocess.Popen([sys.executable, str(script), str(root), "0"], env=_child_env())
    reads = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutotuneCacheWarning)  # a torn read would raise here
        while writer.poll() is None:
            TuningCache(root).lookup(_key("w0-0"))  # a new reader each time: it warns afresh
            reads += 1
    assert writer.wait() == 0 and reads > 0


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

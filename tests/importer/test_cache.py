"""The bytecode cache: hits when nothing changed, misses on any change, never breaks an import."""

from __future__ import annotations

import importlib
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

import ncompass.importer.loader as loader_module
from ncompass.importer import cache
from tests.support import recording
from tests.support.modules import ModuleLab

SPEC = {"targets": [{"module": "cached_mod", "functions": [{"qualname": "f"}]}]}


@pytest.fixture
def rewrites(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts real rewrites (cache misses) by module name."""
    calls: list[str] = []
    original = loader_module.rewrite_source

    def counting(module_name: str, *args: object, **kwargs: object) -> object:
        calls.append(module_name)
        return original(module_name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loader_module, "rewrite_source", counting)
    return calls


def test_second_import_uses_the_cache(lab: ModuleLab, rewrites: list[str]) -> None:
    path = lab.write("cached_mod", "def f():\n    return 1\n")
    assert lab.load("cached_mod", SPEC).f() == 1
    assert rewrites == ["cached_mod"]
    assert Path(cache.cache_path(str(path))).exists()
    module = lab.load("cached_mod", SPEC)
    assert module.f() == 1
    assert rewrites == ["cached_mod"]  # no second rewrite
    assert recording.names_entered() == ["cached_mod:f"]  # and the cached code has the markers


def test_spec_change_invalidates(lab: ModuleLab, rewrites: list[str]) -> None:
    lab.write("cached_mod", "def f():\n    return 1\n\ndef g():\n    return 2\n")
    lab.load("cached_mod", SPEC)
    other = {"targets": [{"module": "cached_mod", "functions": [{"qualname": "g"}]}]}
    module = lab.load("cached_mod", other)
    assert rewrites == ["cached_mod", "cached_mod"]
    module.f()
    module.g()
    assert recording.names_entered() == ["cached_mod:g"]


def test_a_changed_rewriter_invalidates(
    lab: ModuleLab, rewrites: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lab.write("cached_mod", "def f():\n    return 1\n")
    lab.load("cached_mod", SPEC)
    lab.load("cached_mod", SPEC)
    assert rewrites == ["cached_mod"]
    # an editable install after `git pull`: same version, other rewriter code
    monkeypatch.setattr(cache, "rewriter_fingerprint", lambda: b"other rewriter code")
    assert lab.load("cached_mod", SPEC).f() == 1
    assert rewrites == ["cached_mod", "cached_mod"]


def test_source_changed_twice_within_one_second(lab: ModuleLab, rewrites: list[str]) -> None:
    path = lab.write("cached_mod", "def f():\n    return 1\n")
    assert lab.load("cached_mod", SPEC).f() == 1
    stamp = path.stat().st_mtime
    for value in (2, 3):  # same size, same second: mtime-based pycs would go stale
        path.write_text(f"def f():\n    return {value}\n")
        os.utime(path, (stamp, stamp))
        assert lab.load("cached_mod", SPEC).f() == value
    assert len(rewrites) == 3


def test_read_only_pycache_still_imports(lab: ModuleLab, rewrites: list[str]) -> None:
    path = lab.write("cached_mod", "def f():\n    return 1\n")
    pycache = path.parent / "__pycache__"
    if os.geteuid() == 0:
        # root writes through read-only modes; a file in the folder's place fails writes alike
        pycache.write_text("")
    else:
        pycache.mkdir()
        pycache.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert lab.load("cached_mod", SPEC).f() == 1
        assert lab.load("cached_mod", SPEC).f() == 1
    finally:
        if pycache.is_dir():
            pycache.chmod(stat.S_IRWXU)
    assert len(rewrites) == 2


def test_unwritable_cache_location_still_imports(
    lab: ModuleLab, rewrites: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setattr(sys, "pycache_prefix", str(blocker))
    lab.write("cached_mod", "def f():\n    return 1\n")
    assert lab.load("cached_mod", SPEC).f() == 1
    assert lab.load("cached_mod", SPEC).f() == 1
    assert len(rewrites) == 2


def test_dont_write_bytecode_is_respected(
    lab: ModuleLab, rewrites: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    path = lab.write("cached_mod", "def f():\n    return 1\n")
    assert lab.load("cached_mod", SPEC).f() == 1
    assert not Path(cache.cache_path(str(path))).exists()


def test_corrupt_cache_entry_is_a_miss(lab: ModuleLab, rewrites: list[str]) -> None:
    path = lab.write("cached_mod", "def f():\n    return 1\n")
    lab.load("cached_mod", SPEC)
    entry = Path(cache.cache_path(str(path)))
    entry.write_bytes(entry.read_bytes()[:40])
    assert lab.load("cached_mod", SPEC).f() == 1
    assert len(rewrites) == 2


def test_a_damaged_entry_with_an_intact_key_is_rewritten_and_replaced(
    lab: ModuleLab, rewrites: list[str]
) -> None:
    path = lab.write("cached_mod", "def f():\n    return 'ORIGINAL-VALUE'\n")
    assert lab.load("cached_mod", SPEC).f() == "ORIGINAL-VALUE"
    entry = Path(cache.cache_path(str(path)))
    written = entry.read_bytes()
    # One constant changed inside the cached code; magic, key and lengths are untouched.
    damaged = written.replace(b"ORIGINAL-VALUE", b"TAMPERED-VALUE")
    assert damaged != written and len(damaged) == len(written)
    entry.write_bytes(damaged)
    assert lab.load("cached_mod", SPEC).f() == "ORIGINAL-VALUE"
    assert rewrites == ["cached_mod", "cached_mod"]
    assert entry.read_bytes() == written  # the entry was replaced by a good one
    assert lab.load("cached_mod", SPEC).f() == "ORIGINAL-VALUE"
    assert len(rewrites) == 2  # and is used again


def test_concurrent_first_imports_write_one_valid_entry(lab: ModuleLab) -> None:
    path = lab.write("cached_mod", "import time\ntime.sleep(0.02)\n\ndef f():\n    return 1\n")
    lab.load("cached_mod", SPEC)
    Path(cache.cache_path(str(path))).unlink()
    lab.forget("cached_mod")
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(importlib.import_module("cached_mod").f()))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [1] * 6
    key = cache.cache_key(path.read_bytes(), _digest())
    assert cache.load(str(path), key) is not None
    assert not [
        p
        for p in path.parent.joinpath("__pycache__").iterdir()
        if ".tmp" in p.name or p.name.count(".") > 4
    ]


def _digest() -> str:
    from ncompass.importer.hook import active_table

    table = active_table()
    assert table is not None
    entry = table.for_module("cached_mod")
    assert entry is not None
    return entry.digest


def test_rewriter_fingerprint_covers_every_rewriter_module_and_the_runtime_sites() -> None:
    # read through os.listdir (cheap in every process's first cached import): still every
    # module of ncompass/rewrite and runtime/sites.py, names and bytes
    import hashlib

    import ncompass

    package = Path(ncompass.__file__).parent
    expected = hashlib.sha256()
    for path in [*sorted((package / "rewrite").glob("*.py")), package / "runtime" / "sites.py"]:
        expected.update(path.name.encode() + path.read_bytes())
    cache.rewriter_fingerprint.cache_clear()
    assert cache.rewriter_fingerprint() == expected.digest()

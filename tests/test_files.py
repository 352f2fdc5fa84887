"""Atomic writes and file hashes (``ncompass._files``)."""

from __future__ import annotations

import builtins
import hashlib
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from ncompass import _files
from ncompass._files import (
    atomic_output,
    move_if_absent,
    removed_on_error,
    sha256_file,
    temporary_path,
    write_atomic,
)


def _names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_write_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    assert write_atomic(target, '{"new": "ü"}') == target
    assert target.read_text(encoding="utf-8") == '{"new": "ü"}'
    write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert _names(tmp_path) == ["state.json"]


def test_write_atomic_creates_the_folder(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c.txt"
    write_atomic(target, "x")
    assert target.read_text() == "x"


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path: Path) -> None:
    target = tmp_path / "trace.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_output(target) as temporary:
        temporary.write_text("half of the new")
        raise KeyboardInterrupt
    assert target.read_text() == "old"
    assert _names(tmp_path) == ["trace.json"]


def test_write_atomic_refused_by_the_folder_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.mkdir()  # a folder where the file should go: the rename fails
    with pytest.raises(OSError):
        write_atomic(target, "new")
    assert target.is_dir() and _names(tmp_path) == ["file"]


def test_atomic_output_replaces_on_success(tmp_path: Path) -> None:
    target = tmp_path / "out.json.gz"
    with atomic_output(target) as temporary:
        assert temporary.parent == tmp_path
        assert temporary.name.startswith(".") and temporary.suffix == ".gz"
        assert not target.exists()
        temporary.write_bytes(b"gz")
    assert target.read_bytes() == b"gz"
    assert _names(tmp_path) == ["out.json.gz"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_mode_is_set_before_the_first_byte_whatever_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "remote.yaml"
    stale = temporary_path(target)  # left by a crashed writer, readable by all
    stale.write_text("old")
    stale.chmod(0o666)
    modes_before_writing: list[int] = []

    def spy_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, int):
            modes_before_writing.append(stat.S_IMODE(os.fstat(file).st_mode))
        return builtins.open(file, *args, **kwargs)

    monkeypatch.setattr(_files, "open", spy_open, raising=False)
    old_umask = os.umask(0o000)
    try:
        write_atomic(target, "token: secret", mode=0o600)
    finally:
        os.umask(old_umask)
    assert modes_before_writing == [0o600]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text() == "token: secret" and _names(tmp_path) == ["remote.yaml"]

    with atomic_output(tmp_path / "lib.so", mode=0o755) as temporary:
        temporary.write_bytes(b"\x7fELF")
    assert stat.S_IMODE((tmp_path / "lib.so").stat().st_mode) == 0o755


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_without_mode_the_file_follows_the_umask(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "plain", "x")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "plain").stat().st_mode) == 0o644


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the file through /proc")
def test_fsync_flushes_the_data_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "manifest.json"
    synced: list[bytes] = []
    real_fsync = os.fsync

    def record(descriptor: int) -> None:
        assert not target.exists()  # before the rename
        synced.append(Path(f"/proc/self/fd/{descriptor}").read_bytes())
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", record)
    write_atomic(target, b"{}", fsync=True)
    assert synced == [b"{}"]
    write_atomic(target, b"[]")  # the default: no fsync
    assert synced == [b"{}"]


def test_temporary_names_differ_per_thread(tmp_path: Path) -> None:
    target = tmp_path / "cache.pyc"
    names = {temporary_path(target)}
    worker = threading.Thread(target=lambda: names.add(temporary_path(target)))
    worker.start()
    worker.join()
    assert len(names) == 2
    assert all(name.parent == tmp_path and str(os.getpid()) in name.name for name in names)


def test_threads_writing_one_file_never_leave_it_torn(tmp_path: Path) -> None:
    target = tmp_path / "session.json"
    payloads = [bytes([index]) * 200_000 for index in range(8)]
    workers = [
        threading.Thread(target=write_atomic, args=(target, payload)) for payload in payloads
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert target.read_bytes() in payloads
    assert _names(tmp_path) == ["session.json"]


def test_move_if_absent_never_overwrites(tmp_path: Path) -> None:
    first, second, target = tmp_path / "a", tmp_path / "b", tmp_path / "merged.json"
    first.write_text("first")
    second.write_text("second")
    assert move_if_absent(first, target)
    assert not move_if_absent(second, target)
    assert target.read_text() == "first" and second.exists() and not first.exists()


def test_removed_on_error_deletes_only_on_failure(tmp_path: Path) -> None:
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    with removed_on_error(kept) as path:
        path.write_text("x")
    with pytest.raises(ValueError), removed_on_error(dropped) as path:
        path.write_text("x")
        raise ValueError
    assert _names(tmp_path) == ["kept"]


def test_sha256_file_equals_hashlib_on_a_multi_megabyte_file(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 20) + 12_345)  # not a multiple of the block size
    path = tmp_path / "trace.json.gz"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert sha256_file(empty) == hashlib.sha256(b"").hexdigest()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_a_read_only_mode_with_fsync(tmp_path: Path) -> None:
    """The flush goes through the writing descriptor (reopening would fail unless root)."""
    target = tmp_path / "frozen.json"
    write_atomic(target, "{}", fsync=True, mode=0o444)
    assert target.read_text() == "{}" and stat.S_IMODE(target.stat().st_mode) == 0o444

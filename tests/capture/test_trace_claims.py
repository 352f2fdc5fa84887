"""Claiming a trace's name: reservations, symlinks, names as given, and writes that fail.

In-process and fast: real files in a temporary folder, no Python processes started (a dead
process is one that exited: its pid is taken from a finished ``os.fork``'d child).
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from ncompass._files import reservation_path, write_atomic
from ncompass.capture.sidecar import read_sidecar, update_sidecar, write_sidecar
from ncompass.capture.trace_files import (
    TraceExistsError,
    TraceFolderError,
    check_trace_name,
    claim_trace_path,
    prepare_trace_folder,
    release_claim,
    trace_dir,
    trace_write_error,
    write_trace,
)
from ncompass.errors import CaptureError


def _dead_pid() -> int:
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    return child


def test_a_reserved_name_has_no_file_until_the_trace_is_written(tmp_path: Path) -> None:
    path = claim_trace_path(tmp_path, "t", exact=True, reserve=True)
    assert path == tmp_path / "t.json" and not path.exists()
    assert reservation_path(path).read_text() == str(os.getpid())
    with pytest.raises(TraceExistsError, match="being written by another run"):  # this one
        claim_trace_path(tmp_path, "t", exact=True, reserve=True)
    assert claim_trace_path(tmp_path, "t", reserve=True) == tmp_path / "t-1.json"
    write_trace(path, lambda name: Path(name).write_text("{}"))
    assert path.read_text() == "{}" and not reservation_path(path).exists()


def test_a_dead_process_reservation_does_not_block_the_name(tmp_path: Path) -> None:
    reservation_path(tmp_path / "t.json").write_text(str(_dead_pid()))
    assert claim_trace_path(tmp_path, "t", exact=True, reserve=True) == tmp_path / "t.json"
    assert reservation_path(tmp_path / "t.json").read_text() == str(os.getpid())


def test_release_frees_a_reserved_name(tmp_path: Path) -> None:
    path = claim_trace_path(tmp_path, "t", exact=True, reserve=True)
    release_claim(path)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_sidecar_takes_the_name(tmp_path: Path) -> None:
    (tmp_path / "t.ncompass.json").write_text("{}")
    with pytest.raises(TraceExistsError, match=r"t\.ncompass\.json already exists"):
        claim_trace_path(tmp_path, "t", exact=True)
    assert claim_trace_path(tmp_path, "t") == tmp_path / "t-1.json"
    assert claim_trace_path(tmp_path, "t", exact=True, replace=True) == tmp_path / "t.json"


def test_a_symlink_takes_the_name_and_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "t.json").symlink_to(victim)
    (out / "t-1.json").symlink_to(tmp_path / "missing")  # dangling: taken all the same
    assert claim_trace_path(out, "t") == out / "t-2.json"
    write_sidecar(out / "t.json", {"trace": "t.json"})  # a planted sidecar symlink: replaced
    (out / "u.ncompass.json").symlink_to(victim)
    write_sidecar(out / "u.json", {"trace": "u.json"})
    assert victim.read_text() == "precious"
    assert not (out / "u.ncompass.json").is_symlink()


def test_a_symlink_at_the_temporary_name_is_not_followed(tmp_path: Path) -> None:
    from ncompass._files import temporary_path

    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "state.json"
    temporary_path(target).symlink_to(victim)
    write_atomic(target, "new")
    assert target.read_text() == "new" and victim.read_text() == "precious"


def test_a_folder_at_the_trace_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t.json").mkdir()
    with pytest.raises(TraceExistsError, match="is a folder"):
        claim_trace_path(tmp_path, "t", exact=True, replace=True)


@pytest.mark.parametrize("name", ["name with space ß", "tab\there", "-dash", "ünïcode"])
def test_a_chosen_name_is_used_as_given(tmp_path: Path, name: str) -> None:
    assert claim_trace_path(tmp_path, name, exact=True) == tmp_path / f"{name}.json"


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "nul\0", "line\nbreak"])
def test_a_name_that_cannot_be_a_file_name_is_refused(name: str) -> None:
    with pytest.raises(CaptureError, match="--trace-name"):
        check_trace_name(name)


def test_the_trace_folder_is_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert trace_dir("out") == tmp_path / "out"
    monkeypatch.setenv("NCOMPASS_TRACE_DIR", "env")
    assert trace_dir() == tmp_path / "env"


def test_a_folder_that_cannot_be_one_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(TraceFolderError, match="Not a directory"):
        prepare_trace_folder(tmp_path / "afile" / "x")
    with pytest.raises(TraceFolderError, match="a file"):
        prepare_trace_folder(tmp_path / "afile")
    with pytest.raises(TraceFolderError, match="line break"):
        prepare_trace_folder(tmp_path / "a\nb")
    assert prepare_trace_folder(tmp_path / "new") == tmp_path / "new"
    assert list((tmp_path / "new").iterdir()) == []  # the probe is gone


def test_a_writer_that_fails_silently_leaves_nothing(tmp_path: Path) -> None:
    """Kineto's way: it writes ``NAME.tmp``, cannot finish, and returns without an error."""

    def kineto_like(name: str) -> None:
        Path(name + ".tmp").write_text('{"traceEvents": [')

    path = tmp_path / "t.json"
    with pytest.raises(CaptureError, match=re.escape(f"could not write the trace {path}")):
        write_trace(path, kineto_like)
    assert list(tmp_path.iterdir()) == []


def test_a_writer_that_raises_leaves_nothing(tmp_path: Path) -> None:
    def full_disk(name: str) -> None:
        Path(name).write_text("{")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(CaptureError, match=r"No space left on device \(errno 28\); free space"):
        write_trace(tmp_path / "t.json", full_disk)
    assert list(tmp_path.iterdir()) == []


def test_the_write_error_names_the_cause_and_what_to_do() -> None:
    error = trace_write_error(Path("/x/t.json"), OSError(errno.EROFS, "ro"))
    assert str(error) == (
        "could not write the trace /x/t.json: Read-only file system (errno 30); "
        "choose a writable --output-dir"
    )


def test_a_sidecar_update_is_whole(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    assert update_sidecar(trace, {"exit_code": 1}) is None  # nothing to update: nothing written
    assert list(tmp_path.iterdir()) == []
    write_sidecar(trace, {"trace": "t.json", "exit_code": None})
    updated = update_sidecar(trace, {"exit_code": 3})
    assert updated is not None and updated["exit_code"] == 3
    reread = read_sidecar(trace)
    assert reread is not None and reread["exit_code"] == 3 and reread["trace"] == "t.json"
    assert {p.name for p in tmp_path.iterdir()} == {"t.ncompass.json"}


def test_a_processes_folder_takes_the_name_and_a_symlink_there_is_refused(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "t.processes").symlink_to(elsewhere)
    with pytest.raises(TraceExistsError, match=r"t\.processes already exists"):
        claim_trace_path(tmp_path, "t", exact=True)
    assert claim_trace_path(tmp_path, "t") == tmp_path / "t-1.json"
    with pytest.raises(TraceExistsError, match=r"t\.processes is a symlink"):
        claim_trace_path(tmp_path, "t", exact=True, replace=True)
    assert list(elsewhere.iterdir()) == []

"""``filter -o``, ``merge -o`` and ``summarize --html`` never replace a file that is already there
unless ``--force-overwrite`` says so, never write through a symlink, and say in one line why an
output cannot be written (exit code 2, no traceback, nothing lost)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.traces.builders import TraceBuilder

REPO = Path(__file__).resolve().parents[2]
# every command that writes a trace or a page, with the option naming its output
WRITERS = {
    "filter": ("filter", "-o"),
    "merge": ("merge", "-o"),
    "summarize --html": ("summarize", "--html"),
}


def ncompass(
    *args: str | Path, cwd: Path, as_nobody: bool = False
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_nobody else []
    return subprocess.run(
        [*nobody, sys.executable, "-m", "ncompass", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=300,
    )


def a_trace(folder: Path, name: str = "run.json") -> Path:
    builder = TraceBuilder().marker("step", 0, 100).cpu_op("aten::mm", 10, 20)
    builder.launch("gemm", 12, 2, 40, 30)
    return builder.write(folder / name)


def output_name(command: str) -> str:
    return "page.html" if command == "summarize --html" else "out.json"


@pytest.mark.parametrize("command", WRITERS)
def test_an_existing_output_is_refused_before_reading_and_left_unchanged(
    command: str, tmp_path: Path
) -> None:
    # found by trying it: each of them replaced an unrelated file without a word
    trace = a_trace(tmp_path)
    output = tmp_path / output_name(command)
    output.write_text("my notes\n")
    verb, option = WRITERS[command]
    done = ncompass(verb, trace, option, output.name, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: {output.name} already exists and was left unchanged; choose another output "
        "file, or pass --force-overwrite to replace it"
    ]
    assert output.read_text() == "my notes\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([trace.name, output.name])


@pytest.mark.parametrize("command", WRITERS)
def test_force_overwrite_replaces_the_output(command: str, tmp_path: Path) -> None:
    trace = a_trace(tmp_path)
    output = tmp_path / output_name(command)
    output.write_text("an older output\n")
    verb, option = WRITERS[command]
    done = ncompass(verb, trace, option, output.name, "--force-overwrite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert output.read_text() != "an older output\n"


@pytest.mark.parametrize("command", WRITERS)
def test_force_overwrite_replaces_a_symlink_not_what_it_points_at(
    command: str, tmp_path: Path
) -> None:
    trace = a_trace(tmp_path)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not to be touched\n")
    link = tmp_path / output_name(command)
    link.symlink_to(elsewhere)
    verb, option = WRITERS[command]
    refused = ncompass(verb, trace, option, link.name, cwd=tmp_path)
    assert refused.returncode == 2 and "already exists" in refused.stderr
    done = ncompass(verb, trace, option, link.name, "--force-overwrite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not link.is_symlink() and link.stat().st_size > 0
    assert elsewhere.read_text() == "not to be touched\n"


def test_filter_into_a_folder_refuses_before_writing_any_file(tmp_path: Path) -> None:
    first, second = a_trace(tmp_path, "a.json"), a_trace(tmp_path, "b.json")
    folder = tmp_path / "filtered"
    folder.mkdir()
    (folder / "b.filtered.json").write_text("kept\n")
    done = ncompass("filter", first, second, "-o", "filtered/", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: filtered/b.filtered.json already exists and was left unchanged; choose another "
        "output file, or pass --force-overwrite to replace it"
    ]
    assert sorted(path.name for path in folder.iterdir()) == ["b.filtered.json"]
    assert (folder / "b.filtered.json").read_text() == "kept\n"


@pytest.mark.parametrize("command", WRITERS)
def test_an_output_under_a_file_names_the_file(command: str, tmp_path: Path) -> None:
    # found by trying it: "cannot write the trace (File exists)" named neither file
    trace = a_trace(tmp_path)
    (tmp_path / "notes.txt").write_text("notes\n")
    verb, option = WRITERS[command]
    output = f"notes.txt/{output_name(command)}"
    done = ncompass(verb, trace, option, output, cwd=tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: {output}: cannot write")
    assert line.endswith("(notes.txt is a file, not a folder)")
    assert (tmp_path / "notes.txt").read_text() == "notes\n"


@pytest.fixture
def world_readable_folder() -> Iterator[Path]:
    """A folder another user can read (pytest's tmp_path is private to this user)."""
    folder = Path(tempfile.mkdtemp(prefix="ncompass-outputs-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("command", WRITERS)
def test_a_read_only_folder_is_one_line(command: str, world_readable_folder: Path) -> None:
    # as root, permission bits do not stop a write: run the command as nobody instead
    as_nobody = os.geteuid() == 0
    if as_nobody and shutil.which("setpriv") is None:
        pytest.skip("running as root, and no setpriv to run the command as another user")
    trace = a_trace(world_readable_folder)
    trace.chmod(0o644)
    locked = world_readable_folder / "locked"
    locked.mkdir(mode=0o555)
    locked.chmod(0o555)
    verb, option = WRITERS[command]
    output = f"locked/{output_name(command)}"
    done = ncompass(verb, trace, option, output, cwd=world_readable_folder, as_nobody=as_nobody)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: {output}: cannot write{' the trace' if verb != 'summarize' else ''} "
        "(Permission denied)"
    ]
    assert list(locked.iterdir()) == []

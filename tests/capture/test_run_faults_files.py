"""A run never loses or clobbers a file: faults injected under the real ``ncompass run``.

Real processes, the real torch profiler, real file systems: a full tmpfs, a tmpfs remounted
read-only during the run, symlinks planted at the names a run writes, a script that changes its
folder, calls ``os._exit`` or crashes. Each bad case ends in one line naming the path and the
cause, exit 2 (or the script's own exit code), and no empty or partial file at a trace's name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

TIMEOUT_S = 600.0  # a loaded machine: starting torch alone can take tens of seconds

WORK = """
import torch
x = torch.randn(64, 64)
for _ in range(20):
    x = x @ x / 64
"""


def _ncompass(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ncompass", "run", *map(str, args)],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def _script(tmp_path: Path, body: str = "", name: str = "work.py") -> Path:
    script = tmp_path / name
    script.write_text(WORK + body)
    return script


def _our_lines(stderr: str) -> list[str]:
    """ncompass's own lines (Kineto logs its own beside them)."""
    return [line for line in stderr.splitlines() if line.startswith(("error:", "ncompass:"))]


def _entries(folder: Path) -> set[str]:
    return {entry.name for entry in folder.iterdir()}


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own (root only), unmounted afterwards."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_is_one_line_exit_2_and_no_file_left(tmp_path: Path, tmpfs: Path) -> None:
    (tmpfs / "filler").write_bytes(b"\0" * (1000 * 1024))  # the trace (~50 kB) cannot fit
    done = _ncompass("-o", tmpfs, "--trace-name", "t", _script(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = _our_lines(done.stderr)
    assert f"could not write the trace {tmpfs / 't.json'}" in line
    assert "No space left on device (errno 28)" in line and "--output-dir" in line
    assert _entries(tmpfs) == {"filler"}  # no empty trace, no temporary, no reservation


def test_a_full_disk_after_a_failed_script_keeps_the_script_exit_code(
    tmp_path: Path, tmpfs: Path
) -> None:
    (tmpfs / "filler").write_bytes(b"\0" * (1000 * 1024))
    script = _script(tmp_path, "raise SystemExit(3)\n")
    done = _ncompass("-o", tmpfs, "--trace-name", "t", script, cwd=tmp_path)
    assert done.returncode == 3, done.stderr  # the script's failure is not hidden behind 2
    (line,) = _our_lines(done.stderr)
    assert "No space left on device" in line
    assert _entries(tmpfs) == {"filler"}


def test_a_folder_turned_read_only_is_one_line_exit_2(tmp_path: Path, tmpfs: Path) -> None:
    script = _script(
        tmp_path,
        "import subprocess, sys\n"
        "subprocess.run(['mount', '-o', 'remount,ro', sys.argv[1]], check=True)\n",
    )
    done = _ncompass("-o", tmpfs, "--trace-name", "t", script, tmpfs, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = _our_lines(done.stderr)
    assert str(tmpfs / "t.json") in line and "Read-only file system (errno 30)" in line
    # a read-only folder keeps only the hidden reservation, which no later run is blocked by
    assert not (tmpfs / "t.json").exists()
    assert _entries(tmpfs) <= {".t.json.claim"}


def test_a_read_only_folder_is_refused_before_the_script_runs(tmp_path: Path, tmpfs: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    ran = tmp_path / "ran"
    script = _script(tmp_path, f"open({str(ran)!r}, 'w').close()\n")
    done = _ncompass("-o", tmpfs / "traces", script, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = _our_lines(done.stderr)
    assert str(tmpfs / "traces") in line and "Read-only file system" in line
    assert not ran.exists()


def test_a_newline_in_the_output_folder_is_refused(tmp_path: Path) -> None:
    done = _ncompass("-o", "a\nb", "--trace-name", "t", _script(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "line break" in done.stderr and "--output-dir" in done.stderr
    assert not (tmp_path / "a\nb").exists() and not (tmp_path / "ab").exists()


def test_a_folder_at_the_trace_path_is_refused_even_with_force(tmp_path: Path) -> None:
    (tmp_path / "out" / "t.json").mkdir(parents=True)
    done = _ncompass(
        "-o", "out", "--trace-name", "t", "--force-overwrite", _script(tmp_path), cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert "is a folder, not a trace" in done.stderr
    assert (tmp_path / "out" / "t.json").is_dir()
    assert _entries(tmp_path / "out") == {"t.json"}


@pytest.mark.parametrize("planted", ["t.json", "t.ncompass.json"])
def test_a_symlink_at_a_run_file_is_never_written_through(tmp_path: Path, planted: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / planted).symlink_to(victim)
    script = _script(tmp_path)
    refused = _ncompass("-o", out, "--trace-name", "t", script, cwd=tmp_path)
    assert refused.returncode == 2 and f"{out / planted} already exists" in refused.stderr
    replaced = _ncompass("-o", out, "--trace-name", "t", "--force-overwrite", script, cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    assert victim.read_text() == "precious"
    assert not (out / planted).is_symlink()
    assert (out / "t.json").stat().st_size > 0 and (out / "t.ncompass.json").stat().st_size > 0


def test_an_existing_sidecar_is_refused_before_the_script_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "t.ncompass.json").write_text("{}")
    ran = tmp_path / "ran"
    script = _script(tmp_path, f"open({str(ran)!r}, 'w').close()\n")
    done = _ncompass("-o", out, "--trace-name", "t", script, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = _our_lines(done.stderr)
    assert str(out / "t.ncompass.json") in line and "--force-overwrite" in line
    assert not ran.exists() and (out / "t.ncompass.json").read_text() == "{}"


def test_a_script_that_changes_folder_writes_where_the_run_said(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "import os\nos.makedirs('elsewhere/out', exist_ok=True)\nos.chdir('elsewhere')\n",
    )
    (tmp_path / "elsewhere" / "out").mkdir(parents=True)
    (tmp_path / "elsewhere" / "out" / "t.json").write_text("theirs")
    done = _ncompass("-o", "out", "--trace-name", "t", script, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    trace = tmp_path / "out" / "t.json"
    assert f"trace written to {trace} " in done.stderr
    assert trace.stat().st_size > 0 and (tmp_path / "out" / "t.ncompass.json").is_file()
    assert (tmp_path / "elsewhere" / "out" / "t.json").read_text() == "theirs"


def test_os_exit_writes_the_trace_so_far_and_keeps_the_exit_code(tmp_path: Path) -> None:
    script = _script(tmp_path, "import os\nos._exit(3)\n")
    done = _ncompass("-o", "out", "--trace-name", "t", script, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    trace = tmp_path / "out" / "t.json"
    assert f"os._exit(3); the trace so far was written to {trace}" in done.stderr
    assert trace.stat().st_size > 0
    assert _entries(tmp_path / "out") == {"t.json"}  # no reservation, no temporary


def test_a_crash_leaves_no_empty_trace_and_does_not_block_the_name(tmp_path: Path) -> None:
    crash = _script(tmp_path, "import ctypes\nctypes.string_at(0)\n", name="crash.py")
    crashed = _ncompass("-o", "out", "--trace-name", "t", crash, cwd=tmp_path)
    assert crashed.returncode != 0
    assert not (tmp_path / "out" / "t.json").exists()  # no empty file claiming to be a trace
    again = _ncompass("-o", "out", "--trace-name", "t", _script(tmp_path), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "out" / "t.json").stat().st_size > 0
    assert _entries(tmp_path / "out") == {"t.json", "t.ncompass.json"}


@pytest.mark.parametrize("profiler", ["torch", "none"])
def test_an_output_folder_under_a_file_is_one_line(tmp_path: Path, profiler: str) -> None:
    (tmp_path / "afile").write_text("mine")
    done = _ncompass("--profiler", profiler, "-o", "afile/x", _script(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = _our_lines(done.stderr)
    assert str(tmp_path / "afile" / "x") in line and "Not a directory" in line
    assert (tmp_path / "afile").read_text() == "mine"


def test_a_trace_dir_variable_naming_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("mine")
    done = _ncompass(_script(tmp_path), cwd=tmp_path, env={"NCOMPASS_TRACE_DIR": "afile"})
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = _our_lines(done.stderr)
    assert str(tmp_path / "afile") in line and "NCOMPASS_TRACE_DIR" in line


def test_a_trace_name_is_used_as_given(tmp_path: Path) -> None:
    done = _ncompass(
        "-o", "out", "--trace-name", "name with space ß", _script(tmp_path), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert _entries(tmp_path / "out") == {
        "name with space ß.json",
        "name with space ß.ncompass.json",
    }


@pytest.mark.parametrize("name", ["a/b", "..", "."])
def test_a_trace_name_that_is_no_file_name_is_refused(tmp_path: Path, name: str) -> None:
    done = _ncompass(
        "--profiler", "none", "-o", "out", "--trace-name", name, _script(tmp_path), cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    (line,) = _our_lines(done.stderr)
    assert f"--trace-name {name!r}" in line


def test_capture_trace_on_a_full_disk_raises_and_leaves_no_empty_file(
    tmpfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from ncompass import capture_trace
    from ncompass.errors import CaptureError

    monkeypatch.setenv("NCOMPASS_PROFILE", "1")
    (tmpfs / "filler").write_bytes(b"\0" * (1000 * 1024))

    monkeypatch.setenv("NCOMPASS_TRACE_DIR", str(tmpfs))

    @capture_trace(trace_name="step")
    def step() -> None:
        x = torch.randn(64, 64)
        for _ in range(20):
            x = x @ x / 64

    with pytest.raises(CaptureError, match="No space left on device"):
        step()
    assert _entries(tmpfs) == {"filler"}


@pytest.mark.parametrize("planted", ["t-w1.json", "t-w1.ncompass.json"])
def test_a_symlink_at_a_window_trace_is_never_written_through(tmp_path: Path, planted: str) -> None:
    script = tmp_path / "steps.py"
    script.write_text(
        "import torch\n\ndef step(x):\n    return x @ x / 64\n\n"
        "x = torch.randn(32, 32)\nfor _ in range(6):\n    x = step(x)\n"
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - file: {script}\n    functions:\n"
        "      - qualname: step\n        name: step\n"
    )
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / planted).symlink_to(victim)
    done = _ncompass(
        "-c", spec, "--window", "step:2:2", "-o", out, "--trace-name", "t", script, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious"
    assert (out / planted).is_symlink()  # another name was taken for the window instead
    written = [line for line in done.stderr.splitlines() if "window trace written to" in line]
    assert len(written) == 1 and "t-w1-1.json" in written[0]

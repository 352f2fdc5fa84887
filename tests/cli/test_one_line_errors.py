"""Inputs that gave a traceback (exit 1) where one line and exit code 2 are promised, through the
real CLI in a real process: a trace that is a pipe, a huge ``--top``, a script that is a binary
file, a ``session.json`` of the wrong shape, a spec that is a device or a FIFO."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from tests.traces.builders import TraceBuilder

REPO = Path(__file__).resolve().parents[2]


def ncompass(
    *args: str | Path, cwd: Path, pass_fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
        pass_fds=pass_fds,
    )


def assert_one_line(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("error: ", "✗ ")), done.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def a_trace(folder: Path) -> Path:
    return TraceBuilder().marker("step", 0, 100).cpu_op("aten::mm", 10, 20).write(folder / "t.json")


@pytest.mark.parametrize("command", ["summarize", "breakdown", "filter", "merge"])
def test_a_trace_that_is_a_pipe_is_one_line(command: str, tmp_path: Path) -> None:
    # found by trying it: `summarize <(zcat t.json.gz)` ended in io.UnsupportedOperation (seek)
    text = a_trace(tmp_path).read_bytes()
    readable, writable = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(writable, text), os.close(writable)))
    writer.start()
    try:
        extra = ["-o", "out.json"] if command in ("filter", "merge") else []
        done = ncompass(command, f"/dev/fd/{readable}", *extra, cwd=tmp_path, pass_fds=(readable,))
    finally:
        writer.join()
        os.close(readable)
    assert_one_line(done, f"/dev/fd/{readable} is a pipe", "save it to one first")
    assert not (tmp_path / "out.json").exists()


def test_a_device_as_a_trace_is_one_line(tmp_path: Path) -> None:
    done = ncompass("summarize", "/dev/zero", cwd=tmp_path)
    assert_one_line(done, "/dev/zero is not a regular file")


def test_a_top_beyond_any_count_lists_every_row(tmp_path: Path) -> None:
    # found by trying it: islice() refused a stop past sys.maxsize with a ValueError traceback
    done = ncompass("summarize", a_trace(tmp_path), "--top", "99999999999999999999", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "| `step` | 1 |" in done.stdout


def test_a_script_that_is_a_binary_file_is_one_line_before_any_profiler(tmp_path: Path) -> None:
    # found by trying it: a tokenize traceback, exit 1, after the profiler had started
    script = tmp_path / "model.py"
    script.write_bytes(bytes(range(256)) * 4)
    done = ncompass("run", script.name, cwd=tmp_path)
    assert_one_line(done, "model.py: a binary file (it holds NUL bytes), not a Python script")
    assert not (tmp_path / "traces").exists()  # refused before the run claimed a trace name


def test_a_script_that_is_not_text_in_its_encoding_is_one_line(tmp_path: Path) -> None:
    script = tmp_path / "latin.py"
    script.write_bytes(b'print("caf\xe9")\n')
    done = ncompass("run", "--profiler", "none", script.name, cwd=tmp_path)
    assert_one_line(done, "latin.py: not Python source text", "declare its encoding")


def test_a_script_with_a_syntax_error_is_still_reported_as_python_does(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("print(1\n")
    done = ncompass("run", "--profiler", "none", "broken.py", cwd=tmp_path)
    assert done.returncode == 1
    assert "SyntaxError: '(' was never closed" in done.stderr


WRONG_STATES = {
    "an iteration that is a number": ({"iterations": [1]}, "iterations[0] is an integer (1)"),
    "an iteration number that is text": (
        {"iterations": [{"iteration": "x", "trace_path": "t.json"}]},
        "iterations[0].iteration is a string ('x'), not an integer",
    ),
    "no iteration number": (
        {"iterations": [{"trace_path": "t.json"}]},
        "iterations[0].iteration is missing",
    ),
    "marker times that are a list": (
        {"iterations": [{"iteration": 1, "trace_path": "t.json", "markers": [1]}]},
        "iterations[0].markers is a list",
    ),
    "calls that are text": (
        {"iterations": [{"iteration": 1, "trace_path": "t", "markers": {"m": {"calls": "z"}}}]},
        "iterations[0].markers.m.calls is a string ('z'), not an integer",
    ),
    "a config version that is text": (
        {"iterations": [], "config_version": "x"},
        "config_version is a string ('x'), not an integer",
    ),
    "feedback that is a number": ({"iterations": [], "feedback": 5}, "feedback is an integer"),
    "setup times that are a list": ({"iterations": [], "setup_ms": [1]}, "setup_ms is a list"),
    "a state that is a list": ([], "the file holds a list, not an object"),
}


@pytest.mark.parametrize("case", WRONG_STATES)
@pytest.mark.parametrize("command", ["show", "history"])
def test_a_session_state_of_the_wrong_shape_is_one_line(
    case: str, command: str, tmp_path: Path
) -> None:
    # found by trying it: TypeError, ValueError, KeyError or AttributeError tracebacks
    state, words = WRONG_STATES[case]
    path = tmp_path / "traces" / "default" / "session.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(orjson.dumps(state))
    done = ncompass("session", command, cwd=tmp_path)
    assert_one_line(done, "traces/default/session.json: not a session state file", words)
    assert path.read_bytes() == orjson.dumps(state)


def test_a_spec_from_a_device_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("print(1)\n")
    for args in (("spec", "validate", "/dev/zero"), ("run", "-c", "/dev/zero", "s.py")):
        done = ncompass(*args, cwd=tmp_path)
        assert_one_line(done, "/dev/zero: the spec file is larger than 1 MiB")


def test_a_spec_from_a_fifo_is_read_like_a_file(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w") as handle:  # blocks until the command opens it
            handle.write("version: 1\ntargets: {}\n")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    done = ncompass("spec", "validate", fifo.name, cwd=tmp_path)
    writer.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert "0 markers in 0 targets" in done.stdout

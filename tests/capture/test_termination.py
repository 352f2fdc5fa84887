"""``ncompass run`` told to stop: SIGTERM writes the trace as Ctrl-C does; a stop before the
program starts is one line and leaves nothing. Real processes, real signals, real traces."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ncompass.capture.nvtx_recorder import find_compiler
from tests.conftest import REPO

DEADLINE_S = 300.0  # the machine may be loaded: starting torch alone can take tens of seconds

LOOPING_SCRIPT = """
import time

def work():
    return sum(range(1000))

print("started", flush=True)
deadline = time.monotonic() + 600
while time.monotonic() < deadline:
    work()
    time.sleep(0.02)
"""

SPEC = """
version: 1
targets:
  - file: {script}
    functions:
      - qualname: work
        name: loop.work
"""


def _files(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "loop.py"
    script.write_text(LOOPING_SCRIPT)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(script=script))
    return script, spec


def _start(tmp_path: Path, *args: str, new_session: bool = False) -> subprocess.Popen[bytes]:
    """``python -m ncompass ARGS`` with its output in files (read while it runs)."""
    stdout = (tmp_path / "stdout.txt").open("wb")
    stderr = (tmp_path / "stderr.txt").open("wb")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "ncompass", *args],
            cwd=REPO,
            stdout=stdout,
            stderr=stderr,
            start_new_session=new_session,
        )
    finally:
        stdout.close()
        stderr.close()


def _wait_for_output(process: subprocess.Popen[bytes], path: Path, text: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    process.wait()
    pytest.fail(f"no {text!r} from the run: {path.parent.joinpath('stderr.txt').read_text()}")


def _stopped(process: subprocess.Popen[bytes], tmp_path: Path) -> tuple[int, str]:
    """The exit code and standard error of a run once it ended."""
    try:
        code = process.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    return code, (tmp_path / "stderr.txt").read_text(errors="replace")


def _marker_names(trace: Path) -> set[str]:
    events = json.loads(trace.read_text())["traceEvents"]
    return {event.get("name") for event in events}


def test_sigterm_mid_run_writes_the_trace_and_sidecar_then_exits_143(tmp_path: Path) -> None:
    script, spec = _files(tmp_path)
    out = tmp_path / "traces"
    process = _start(
        tmp_path, "run", "-c", str(spec), "-o", str(out), "--trace-name", "t", str(script)
    )
    _wait_for_output(process, tmp_path / "stdout.txt", "started")
    process.send_signal(signal.SIGTERM)
    code, stderr = _stopped(process, tmp_path)
    assert code == 143, stderr
    trace = out / "t.json"
    assert trace.stat().st_size > 0, stderr
    assert "loop.work" in _marker_names(trace)
    sidecar = json.loads((out / "t.ncompass.json").read_text())
    assert sidecar["exit_code"] == 143
    assert f"trace written to {trace}" in stderr


@pytest.mark.parametrize("whole_group", [False, True], ids=["parent-only", "process-group"])
def test_sigterm_reaches_the_child_of_a_reexecuted_run_and_the_trace_is_written(
    tmp_path: Path, whole_group: bool
) -> None:
    """``--profiler nvtx-trace`` re-executes the run in a child: a SIGTERM sent to the parent
    alone is passed on; one sent to the whole group reaches the child twice (directly and
    passed on), and the second must not kill it before it reports."""
    if find_compiler() is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH: cannot build the NVTX recorder")
    script, spec = _files(tmp_path)
    out = tmp_path / "traces"
    args = ["run", "--profiler", "nvtx-trace", "-c", str(spec), "-o", str(out)]
    process = _start(tmp_path, *args, "--trace-name", "t", str(script), new_session=whole_group)
    _wait_for_output(process, tmp_path / "stdout.txt", "started")
    if whole_group:
        os.killpg(process.pid, signal.SIGTERM)
    else:
        process.send_signal(signal.SIGTERM)
    code, stderr = _stopped(process, tmp_path)
    assert code == 143, stderr
    trace = out / "t.json"
    assert "loop.work" in _marker_names(trace), stderr
    sidecar = json.loads((out / "t.ncompass.json").read_text())
    assert sidecar["exit_code"] == 143
    assert sidecar["profiler"] == "nvtx-trace"


@pytest.mark.parametrize(
    ("signal_number", "code", "line"),
    [
        (signal.SIGINT, 130, "ncompass: interrupted"),
        (signal.SIGTERM, 143, "ncompass: stopped by SIGTERM"),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_a_stop_during_start_up_is_one_line_and_leaves_nothing(
    tmp_path: Path, signal_number: int, code: int, line: str
) -> None:
    """The run is held in start-up by a spec that is a FIFO nobody has written yet."""
    script, _ = _files(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.unlink()
    os.mkfifo(spec)
    out = tmp_path / "traces"
    process = _start(tmp_path, "run", "-c", str(spec), "-o", str(out), str(script))
    writer = _open_when_read(process, spec)
    try:
        process.send_signal(signal_number)
        exit_code, stderr = _stopped(process, tmp_path)
    finally:
        os.close(writer)
    assert exit_code == code, stderr
    assert stderr.strip().splitlines() == [line]
    assert not out.exists() or list(out.iterdir()) == []


def _open_when_read(process: subprocess.Popen[bytes], fifo: Path) -> int:
    """Open ``fifo`` for writing once the run has opened it for reading (it then waits)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        time.sleep(0.05)
    process.kill()
    process.wait()
    pytest.fail("the run never opened its spec")


THREAD_MASKS = """\
import os, signal, threading, torch

def blocks_stops(task):
    with open(f"/proc/self/task/{task}/status") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigBlk:"))
    return all(mask >> (number - 1) & 1 for number in (signal.SIGINT, signal.SIGTERM))

main = threading.get_native_id()
others = [int(task) for task in os.listdir("/proc/self/task") if int(task) != main]
print("threads", len(others), "taking stops", [t for t in others if not blocks_stops(t)])
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_the_profilers_threads_leave_stop_signals_to_the_main_thread(tmp_path: Path) -> None:
    """A SIGTERM taken by a profiler thread would not interrupt a main thread waiting in
    time.sleep: the run would stop only when the wait ended (a stopped rank kept sleeping)."""
    (tmp_path / "masks.py").write_text(THREAD_MASKS)
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "run", "--output-dir", str(tmp_path / "out"),
         "--no-follow", str(tmp_path / "masks.py")],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("threads"))
    assert int(line.split()[1]) > 0, line  # the torch profiler runs threads of its own
    assert line.endswith("taking stops []"), line

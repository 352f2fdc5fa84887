"""``ncompass run`` stopped at any moment, by itself or with its whole process group.

Real command lines, real signals, the real torch profiler and real DataLoader workers: a stop
while the profiler starts never crashes the process (it did, in Kineto's teardown: exit 139),
a group-wide SIGTERM that also ends the program's workers still writes the trace, and the
sidecar records the run's own exit code.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

DEADLINE_S = 300.0  # the machine may be loaded: starting torch alone can take tens of seconds

START_UP_SCRIPT = """
import time
print("FIRST LINE", flush=True)
time.sleep(30)
"""

CATCHING_SCRIPT = """
import time
print("FIRST LINE", flush=True)
try:
    time.sleep(60)
except KeyboardInterrupt:
    print("stopping cleanly", flush=True)
"""

# Two real DataLoader workers; each takes a moment to exit when told to, as workers with
# clean-up do, so that they die while the main process writes its trace.
TRAINING_SCRIPT = """
import os
import signal
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def exit_after_cleanup(signum, frame):
    time.sleep(0.5)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def worker_init(_worker_id):
    signal.signal(signal.SIGTERM, exit_after_cleanup)


def main():
    data = TensorDataset(torch.randn(4096, 8))
    loader = DataLoader(data, batch_size=4, num_workers=2, worker_init_fn=worker_init)
    model = torch.nn.Linear(8, 8)
    step = 0
    while True:
        for (batch,) in loader:
            model(batch).sum().backward()
            step += 1
            if step == 20:
                print("TRAINING", flush=True)


main()
"""

STOP_LINES = {
    signal.SIGTERM: "ncompass: stopped by SIGTERM",
    signal.SIGINT: "ncompass: interrupted",
}
EXIT_CODES = {signal.SIGTERM: 143, signal.SIGINT: 130}


def _command(out: Path, script: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "ncompass", "run", "-o", str(out), *options, str(script)]


def _start(tmp_path: Path, command: list[str]) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own, its output in files (read while it runs)."""
    with (
        (tmp_path / "stdout.txt").open("wb") as stdout,
        (tmp_path / "stderr.txt").open("wb") as stderr,
    ):
        return subprocess.Popen(
            command, cwd=REPO, stdout=stdout, stderr=stderr, start_new_session=True
        )


def _ended(process: subprocess.Popen[bytes], tmp_path: Path) -> tuple[int, str, str]:
    """The exit code, standard output and standard error of a run once it ended."""
    try:
        code = process.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    read = lambda name: (tmp_path / name).read_text(errors="replace")  # noqa: E731
    return code, read("stdout.txt"), read("stderr.txt")


def _wait_for_output(process: subprocess.Popen[bytes], tmp_path: Path, text: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if text in (tmp_path / "stdout.txt").read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    process.wait()
    pytest.fail(f"no {text!r} from the run: {(tmp_path / 'stderr.txt').read_text()}")


def _traces(out: Path) -> list[Path]:
    """The run's main traces (sidecars and per-process traces aside)."""
    if not out.is_dir():
        return []
    return sorted(path for path in out.glob("*.json") if not path.name.endswith(".ncompass.json"))


def _sidecar(trace: Path) -> dict[str, object]:
    document: dict[str, object] = json.loads(trace.with_suffix(".ncompass.json").read_text())
    return document


def _assert_trace(trace: Path) -> None:
    events = json.loads(trace.read_text())["traceEvents"]
    assert events, f"{trace} holds no events"


# Ten fixed moments spread over the first three seconds: before the profiler starts, while
# Kineto starts up, and (on a quick machine) once the program runs.
MOMENTS = [
    (seed, signal.SIGTERM if seed % 2 == 0 else signal.SIGINT, random.Random(seed).uniform(0, 3))
    for seed in range(10)
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "signum", "delay_s"), MOMENTS, ids=[f"seed{seed}" for seed, _, _ in MOMENTS]
)
def test_a_stop_at_any_moment_of_start_up_is_one_line_and_its_exit_code(
    tmp_path: Path, seed: int, signum: signal.Signals, delay_s: float
) -> None:
    script = tmp_path / "start.py"
    script.write_text(START_UP_SCRIPT)
    out = tmp_path / "out"
    process = _start(tmp_path, _command(out, script))
    time.sleep(delay_s)
    process.send_signal(signum)
    code, stdout, stderr = _ended(process, tmp_path)

    assert code == EXIT_CODES[signum], f"seed {seed}, {delay_s:.2f} s: exit {code}\n{stderr}"
    assert "Segmentation" not in stderr and "Fatal Python error" not in stderr
    if "FIRST LINE" in stdout:  # the program ran: the trace so far is written
        (trace,) = _traces(out)
        _assert_trace(trace)
        assert _sidecar(trace)["exit_code"] == EXIT_CODES[signum]
    else:  # stopped before the program: one line, nothing left behind
        assert stderr.strip().splitlines() == [STOP_LINES[signum]], stderr
        assert _traces(out) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_once_the_program_runs_writes_the_trace(
    tmp_path: Path, signum: signal.Signals
) -> None:
    script = tmp_path / "start.py"
    script.write_text(START_UP_SCRIPT)
    out = tmp_path / "out"
    process = _start(tmp_path, _command(out, script))
    _wait_for_output(process, tmp_path, "FIRST LINE")
    process.send_signal(signum)
    code, _, stderr = _ended(process, tmp_path)

    assert code == EXIT_CODES[signum], stderr
    (trace,) = _traces(out)
    _assert_trace(trace)
    assert _sidecar(trace)["exit_code"] == EXIT_CODES[signum]


def test_the_sidecar_records_143_when_the_program_caught_the_stop(tmp_path: Path) -> None:
    script = tmp_path / "catching.py"
    script.write_text(CATCHING_SCRIPT)
    out = tmp_path / "out"
    process = _start(tmp_path, _command(out, script))
    _wait_for_output(process, tmp_path, "FIRST LINE")
    process.send_signal(signal.SIGTERM)
    code, stdout, stderr = _ended(process, tmp_path)

    assert "stopping cleanly" in stdout  # the program returned normally: its own code is 0
    assert code == 143, stderr
    (trace,) = _traces(out)
    assert _sidecar(trace)["exit_code"] == 143


@pytest.mark.slow
@pytest.mark.parametrize("follow", [True, False], ids=["follow", "no-follow"])
def test_a_group_wide_sigterm_that_ends_dataloader_workers_keeps_the_trace(
    tmp_path: Path, follow: bool
) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAINING_SCRIPT)
    out = tmp_path / "out"
    options = () if follow else ("--no-follow",)
    process = _start(tmp_path, _command(out, script, *options))
    _wait_for_output(process, tmp_path, "TRAINING")
    os.killpg(process.pid, signal.SIGTERM)  # what a terminal or a job scheduler sends
    code, _, stderr = _ended(process, tmp_path)

    # (a worker's death may still show as "Exception ignored in ... __del__" while the program
    # unwinds, as it does without ncompass; it must not abort the trace's writing)
    assert "ncompass: trace written to" in stderr, stderr
    assert code == 143, stderr
    (trace,) = _traces(out)
    _assert_trace(trace)
    assert _sidecar(trace)["exit_code"] == 143


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
@pytest.mark.parametrize("follow", [True, False], ids=["follow", "no-follow"])
def test_timeout_with_dataloader_workers_keeps_the_trace(tmp_path: Path, follow: bool) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAINING_SCRIPT)
    out = tmp_path / "out"
    options = () if follow else ("--no-follow",)
    # `timeout` signals its whole process group: the run and the program's workers alike;
    # 20 s leaves a loaded machine time to start torch and train
    command = ["timeout", "-s", "TERM", "20", *_command(out, script, *options)]
    process = _start(tmp_path, command)
    code, stdout, stderr = _ended(process, tmp_path)

    assert "TRAINING" in stdout, f"the run never trained before the timeout:\n{stderr}"
    assert "ncompass: trace written to" in stderr, stderr
    assert code == 124, stderr  # timeout's own code for "timed out"
    (trace,) = _traces(out)
    _assert_trace(trace)
    assert _sidecar(trace)["exit_code"] == 143

"""Recording windows in every process of a followed run: real children, real torch profiler.

Each child counts its own calls of the window's marker (by marker), records the run's
wall-clock span (by time) or the run's captures (on demand); window N of every process is
merged into the run's ``NAME-wN.json``, one track per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # every test starts real processes that import torch

REPO = Path(__file__).resolve().parents[2]
REPEAT = ("--repeat", "2", "--every", "5")
RECORDED = ["main.py", "fork child", "child 0", "child 1"]  # the processes that call the step

# the call number is recorded with each step: a nested range named after it
WORK = """
import os
import signal
import sys
import time

import torch


def step(i):
    with torch.profiler.record_function(f"call {i}"):
        return torch.ones(4).sum() + i


def calls(n, die_at=None):
    for i in range(1, n + 1):
        step(i)
        if i == die_at:  # inside its window: calls 4 to 6
            os.kill(os.getpid(), signal.SIGKILL)


def until_stopped(stop_file, log_file):
    i = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not os.path.exists(stop_file):
        i += 1
        step(i)
        with open(log_file, "a") as log:
            log.write(f"{i} {time.time()}\\n")
        time.sleep(0.05)
"""

SPEC = """
version: 1
targets:
  - module: work
    functions:
      - qualname: step
        name: step
"""

CHILDREN = """
import multiprocessing

import work

if __name__ == "__main__":
    for i in range(1, 5):
        work.step(i)  # the run's own window 1 is open from here (calls 4 to 6)
    fork = multiprocessing.get_context("fork").Process(
        target=work.calls, args=(12,), name="fork child"
    )
    fork.start()  # a forked child counts its own calls from 1
    spawn = multiprocessing.get_context("spawn")
    children = [
        spawn.Process(target=work.calls, args=(12,), name="child 0"),
        spawn.Process(target=work.calls, args=(12,), name="child 1"),
        spawn.Process(target=work.calls, args=(12, 5), name="killed child"),
    ]
    for child in children:
        child.start()
    for child in [fork, *children]:
        child.join()
    for i in range(5, 13):
        work.step(i)
"""

ONE_CHILD_UNTIL_STOPPED = """
import multiprocessing
import sys

import work

if __name__ == "__main__":
    spawn = multiprocessing.get_context("spawn")
    child = spawn.Process(target=work.until_stopped, args=sys.argv[1:3], name="worker")
    child.start()
    child.join()
"""


def _project(tmp_path: Path, main: str) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "work.py").write_text(textwrap.dedent(WORK).lstrip())
    (folder / "spec.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    (folder / "main.py").write_text(textwrap.dedent(main).lstrip())
    return folder


def _environment(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO)])
    return env


def _run_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out", *args]


def _trace(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _calls_by_role(trace: dict[str, Any]) -> dict[str, list[int]]:
    """The call numbers of the steps each process recorded, by its role."""
    roles = {p["pid"]: p["role"] for p in trace["ncompass_processes"]}
    calls: dict[str, list[int]] = {}
    steps: dict[str, int] = {}
    for event in trace["traceEvents"]:
        if event.get("cat") != "user_annotation":
            continue
        role = roles.get(event["pid"], str(event["pid"]))
        if event["name"] == "step":
            steps[role] = steps.get(role, 0) + 1
        elif event["name"].startswith("call "):
            calls.setdefault(role, []).append(int(event["name"].split()[1]))
    assert {role: len(numbers) for role, numbers in calls.items()} == steps
    return {role: sorted(numbers) for role, numbers in calls.items()}


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ncompass: warning")]


@pytest.fixture(scope="module")
def by_marker(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = _project(tmp_path_factory.mktemp("by-marker"), CHILDREN)
    result = subprocess.run(
        _run_command("--trace-name", "run", "--window", "step:4:3", *REPEAT, "main.py"),
        cwd=folder,
        env=_environment(folder),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return folder, result


def test_each_child_records_its_own_calls_of_the_window(by_marker: tuple[Path, Any]) -> None:
    folder, _ = by_marker
    trace = _trace(folder / "out" / "run-w1.json")
    each = [4, 5, 6]
    assert _calls_by_role(trace) == dict.fromkeys(RECORDED, each)
    sidecar = _trace(folder / "out" / "run-w1.ncompass.json")
    assert sidecar["window"]["first_call"] == 4 and sidecar["window"]["last_call"] == 6
    assert sidecar["processes"] == trace["ncompass_processes"]
    processes = {p["role"]: p for p in trace["ncompass_processes"]}
    assert next(iter(processes)) == "main.py"  # the run's own first
    assert sorted(processes) == ["child 0", "child 1", "fork child", "killed child", "main.py"]
    for role in RECORDED:  # each process's own part stays beside the run's
        own = folder / processes[role]["trace_file"]
        assert own.parent.name == "run.processes"
        assert own.name == f"{processes[role]['pid']}-w1.json"


def test_repeat_every_records_each_window_in_every_child(by_marker: tuple[Path, Any]) -> None:
    folder, _ = by_marker
    trace = _trace(folder / "out" / "run-w2.json")
    each = [9, 10, 11]
    assert _calls_by_role(trace) == dict.fromkeys(RECORDED, each)
    assert _trace(folder / "out" / "run-w2.ncompass.json")["window"]["first_call"] == 9
    assert not (folder / "out" / "run-w3.json").exists()
    assert not (folder / "out" / "run.json").exists()  # only windows are recorded


def test_a_child_killed_inside_its_window_loses_only_its_own(by_marker: tuple[Path, Any]) -> None:
    folder, result = by_marker
    trace = _trace(folder / "out" / "run-w1.json")
    killed = next(p for p in trace["ncompass_processes"] if p["role"] == "killed child")
    assert killed["trace_file"] is None and killed["exit_code"] == -9
    warnings = _warnings(result.stderr)
    about_it = [line for line in warnings if str(killed["pid"]) in line]
    assert len(about_it) == 1, result.stderr
    assert "window 1" in about_it[0] and "SIGKILL" in about_it[0]
    assert not any("never opened" in line for line in warnings)


def _started(log_file: Path, deadline_s: float = 300.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if log_file.exists() and log_file.read_text():
            return
        time.sleep(0.1)
    raise AssertionError("the child never called its step")


def _logged_calls(log_file: Path) -> list[tuple[int, float]]:
    lines = [line.split() for line in log_file.read_text().splitlines()]
    return [(int(call), float(when)) for call, when in lines]


def test_a_window_by_time_is_the_same_span_in_a_child(tmp_path: Path) -> None:
    folder = _project(tmp_path, ONE_CHILD_UNTIL_STOPPED)
    stop_file, log_file = folder / "stop", folder / "calls.log"
    run = subprocess.Popen(
        [
            *_run_command("--trace-name", "run", "--delay", "0", "--duration", "15"),
            *("main.py", str(stop_file), str(log_file)),
        ],
        cwd=folder,
        env=_environment(folder),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _started(log_file)
        started = time.time()
        # the child goes on calling well after the window closed (15 s after the start)
        while not any(when > started + 17 for _, when in _logged_calls(log_file)):
            assert time.time() < started + 300, "the child stopped calling"
            time.sleep(0.2)
    finally:
        stop_file.touch()
        _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    sidecar = _trace(folder / "out" / "run-w1.ncompass.json")
    closed = sidecar["started_unix_s"] + sidecar["duration_s"]
    recorded = _calls_by_role(_trace(folder / "out" / "run-w1.json"))["worker"]
    logged = dict(_logged_calls(log_file))
    # started after the window opened: from its first call; nothing after the window closed
    assert recorded[0] == 1
    assert recorded == list(range(1, recorded[-1] + 1))
    assert logged[recorded[-1]] <= closed + 1.0
    assert max(logged) > recorded[-1]


def test_a_capture_on_demand_records_the_runs_child(tmp_path: Path) -> None:
    folder = _project(tmp_path, ONE_CHILD_UNTIL_STOPPED)
    stop_file, log_file = folder / "stop", folder / "calls.log"
    run = subprocess.Popen(
        [
            *_run_command("--trace-name", "srv", "--on-demand"),
            *("main.py", str(stop_file), str(log_file)),
        ],
        cwd=folder,
        env=_environment(folder),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _started(log_file)
        before = len(_logged_calls(log_file))
        captured = subprocess.run(
            [sys.executable, "-m", "ncompass", "capture", str(run.pid), "--duration", "1"],
            capture_output=True,
            text=True,
            env=_environment(folder),
            timeout=300,
        )
        assert captured.returncode == 0, captured.stderr
        printed = folder / captured.stdout.strip()
        assert printed.name == "srv-w1.json"
        after = len(_logged_calls(log_file))
        # while the run goes on, the printed trace holds the child's part already
        assert _calls_by_role(_trace(printed)).get("worker"), "the capture missed the child"
        while len(_logged_calls(log_file)) < after + 40:  # well after the capture closed
            assert run.poll() is None, "the run ended early"
            time.sleep(0.2)
    finally:
        stop_file.touch()
        _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    trace = _trace(folder / "out" / "srv-w1.json")
    recorded = _calls_by_role(trace)["worker"]
    assert recorded, "the child recorded nothing of the capture"
    assert before < recorded[0] and recorded[-1] < after + 40  # only calls during the capture
    assert _trace(folder / "out" / "srv-w1.ncompass.json")["window"]["trigger"] == "demand"

"""Followed processes never lose their data: real ``ncompass run`` processes that end badly.

Each test runs the real CLI on a script whose children end the way real programs' do (a
``multiprocessing.Pool`` that terminates its workers, ``os._exit``, a segfault, a signal to the
run itself) and checks the traces, the warnings and the run's private folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # every test starts real processes that import torch

REPO = Path(__file__).resolve().parents[2]

WORK = """
def step(i):
    return sum(range(1000 + i))
"""

SPEC = """
version: 1
targets:
  - module: work
    functions:
      - qualname: step
        name: work.step
"""


def _project(tmp_path: Path, main: str) -> Path:
    (tmp_path / "work.py").write_text(WORK)
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "main.py").write_text(textwrap.dedent(main))
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _environment(folder: Path) -> dict[str, str]:
    # a temporary folder of the test's own: the run's follow folder is looked for there
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)]),
        "TMPDIR": str(folder / "tmp"),
    }


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out", *args]


def _ncompass_run(
    folder: Path, *args: str, script: str = "main.py"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(*args, script),
        cwd=folder,
        env=_environment(folder),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _trace(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ncompass: warning:")]


def _follow_folders(folder: Path) -> list[Path]:
    return sorted((folder / "tmp").glob("ncompass-follow-*"))


POOL = """
import multiprocessing

import torch

import work


def job(i):
    for _ in range(500):  # a trace that takes a while to write: the pool terminates meanwhile
        torch.ones(4) + i
    return work.step(i)


if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    with multiprocessing.Pool(2) as pool:  # __exit__ terminates the workers
        print(sum(pool.map(job, range(8))))
"""


def test_workers_a_pool_terminates_after_they_wrote_are_merged(tmp_path: Path) -> None:
    folder = _project(tmp_path, POOL)

    result = _ncompass_run(folder, "--trace-name", "pool")

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert _warnings(result.stderr) == []
    processes = _trace(folder / "out" / "pool.json")["ncompass_processes"]
    assert len(processes) == 3
    assert all(process["trace_file"] for process in processes), processes
    for process in processes[1:]:
        assert (folder / process["trace_file"]).stat().st_size > 0
    assert _follow_folders(folder) == []


ENDINGS = """
import ctypes
import multiprocessing
import os

import torch

import work


def ends(how):
    torch.ones(4) + 1
    work.step(1)
    if how == "exit":
        os._exit(3)
    ctypes.string_at(0)  # a segfault


if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=ends, args=(how,), name=how) for how in ("exit", "crash")]
    for child in children:
        child.start()
    for child in children:
        child.join()
    print([child.exitcode for child in children])
"""


def test_os_exit_writes_the_trace_and_a_crash_is_one_line(tmp_path: Path) -> None:
    folder = _project(tmp_path, ENDINGS)

    result = _ncompass_run(folder, "--trace-name", "endings")

    assert result.returncode == 0, result.stderr
    assert "[3, -11]" in result.stdout
    assert "Traceback" not in result.stderr
    processes = {
        p["role"]: p for p in _trace(folder / "out" / "endings.json")["ncompass_processes"]
    }
    assert processes["exit"]["trace_file"], processes  # os._exit: written first
    assert _trace(folder / processes["exit"]["trace_file"])["traceEvents"]
    assert processes["crash"]["trace_file"] is None
    crash = processes["crash"]["pid"]
    assert _warnings(result.stderr) == [
        f"ncompass: warning: process {crash} (crash) left no trace: it was killed by SIGSEGV; "
        "what it recorded is lost"
    ]
    left = list((folder / "out" / "endings.processes").iterdir())
    assert [path for path in left if path.stat().st_size == 0] == []  # no empty claim stays


TIMED = """
import multiprocessing
import time

import torch

import work


def work_for(seconds):
    end = time.time() + seconds
    while time.time() < end:
        work.step(1)
        torch.ones(8) * 2
        time.sleep(0.01)


if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=work_for, args=(9,)) for _ in range(2)]
    for worker in workers:
        worker.start()
    work_for(9)
    for worker in workers:
        worker.join()
"""


def test_time_windows_of_every_process_are_one_wall_clock_span(tmp_path: Path) -> None:
    folder = _project(tmp_path, TIMED)

    result = _ncompass_run(folder, "--trace-name", "timed", "--delay", "3", "--duration", "2")

    assert result.returncode == 0, result.stderr
    trace = _trace(folder / "out" / "timed-w1.json")
    spans: dict[int, list[float]] = defaultdict(lambda: [float("inf"), float("-inf")])
    for event in trace["traceEvents"]:
        if event.get("ph") == "X" and isinstance(event.get("pid"), int):
            span = spans[event["pid"]]
            span[0] = min(span[0], event["ts"])
            span[1] = max(span[1], event["ts"] + event.get("dur", 0))
    assert len(spans) == 3, result.stderr  # the run's process and both workers
    starts = [start for start, _ in spans.values()]
    ends = [end for _, end in spans.values()]
    # one span: every process records while every other does (the run's own window used to
    # open 1.7-2.9 s after its workers' had closed)
    assert max(starts) < min(ends), spans


SILENT = """
import multiprocessing

import torch

import work


def worker():
    torch.ones(4) * 2  # works, never calls work.step


if __name__ == "__main__":
    workers = [multiprocessing.get_context("fork").Process(target=worker) for _ in range(2)]
    for child in workers:
        child.start()
    for child in workers:
        child.join()
    for i in range(5):
        work.step(i)
"""


def test_processes_that_never_reach_the_marker_window_are_named(tmp_path: Path) -> None:
    folder = _project(tmp_path, SILENT)

    result = _ncompass_run(folder, "--trace-name", "silent", "--window", "work.step:2:2")

    assert result.returncode == 0, result.stderr
    assert (folder / "out" / "silent-w1.json").is_file()
    silent = [line for line in _warnings(result.stderr) if "recorded nothing" in line]
    assert silent == [
        "ncompass: warning: window 1: 2 of 3 processes recorded nothing in it "
        "(ForkProcess-1, ForkProcess-2): they never called work.step"
    ]


SLEEPER = """
import multiprocessing
import os
import time

import work


def child(parent):
    work.step(1)
    deadline = time.time() + 60
    while os.getppid() == parent and time.time() < deadline:  # ends with the run
        time.sleep(0.1)


if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    worker = context.Process(target=child, args=(os.getpid(),), daemon=True)
    worker.start()
    print("started", flush=True)
    time.sleep(60)
"""


def _started(folder: Path) -> subprocess.Popen[str]:
    run = subprocess.Popen(
        _command("--trace-name", "sleeper", "--force-overwrite", "main.py"),
        cwd=folder,
        env=_environment(folder),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None
    assert run.stdout.readline() == "started\n"
    return run


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_removes_its_follow_folder(tmp_path: Path, stop: signal.Signals) -> None:
    folder = _project(tmp_path, SLEEPER)
    run = _started(folder)
    assert len(_follow_folders(folder)) == 1

    run.send_signal(stop)
    _, stderr = run.communicate(timeout=300)

    assert run.returncode == 128 + stop, stderr
    assert _follow_folders(folder) == []


def test_the_next_run_removes_the_folder_of_a_killed_run(tmp_path: Path) -> None:
    folder = _project(tmp_path, SLEEPER)
    run = _started(folder)
    killed = _follow_folders(folder)
    run.kill()  # SIGKILL: nothing of the run's runs
    run.communicate(timeout=120)  # its child ends once it sees the run gone
    assert _follow_folders(folder) == killed
    (folder / "main.py").write_text("import work\nwork.step(1)\n")

    result = _ncompass_run(folder, "--trace-name", "next")

    assert result.returncode == 0, result.stderr
    assert _follow_folders(folder) == []


def test_a_live_runs_folder_is_kept(tmp_path: Path) -> None:
    folder = _project(tmp_path, SLEEPER)
    run = _started(folder)
    try:
        live = _follow_folders(folder)
        (folder / "next.py").write_text("import work\nwork.step(1)\n")
        result = _ncompass_run(folder, "--trace-name", "next", script="next.py")
        assert result.returncode == 0, result.stderr
        assert set(live) <= set(_follow_folders(folder))
    finally:
        run.terminate()
        run.communicate(timeout=300)
    deadline = time.monotonic() + 60
    while _follow_folders(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _follow_folders(folder) == []

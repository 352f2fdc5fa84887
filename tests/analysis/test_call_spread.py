"""A finding rests on the distribution of the calls, and on whether the machine was busy.

Real runs under ``ncompass run --profiler torch``: a marker whose time is one slow first call
among fast ones is said to be carried by that call (not "drill into it"), a marker whose every
call is slow keeps the finding with its spread, and a run that shared its core with a busy loop
is said to have waited for a CPU, from the sidecar.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ncompass.analysis import machine_wait
from ncompass.analysis.summary import summarize_trace
from ncompass.capture import cpu_wait

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import sys
import time

import torch

import work

x = torch.randn(64, 64)
for call in range(20):
    work.step(x, slow_first=sys.argv[1] == "outlier", first=call == 0)
"""

WORK = """
import time


def step(x, slow_first, first):
    # sleeps, not work: a busy machine stretches work, and the point is the calls' spread
    if slow_first and first:
        time.sleep(2.0)  # a warm-up: one call of 2 s among calls of microseconds
    elif not slow_first:
        time.sleep(0.05)  # every call is slow
    return sum(range(200)) + float(x[0, 0])
"""

SPEC = """
version: 1
targets:
  - module: work
    functions:
      - qualname: step
        name: work.step
"""

HOG = "while True:\n    sum(i * i for i in range(1000))\n"


def _record(folder: Path, name: str, mode: str, core: set[int] | None = None) -> Path:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(REPO)]))
    pin = (lambda: os.sched_setaffinity(0, core)) if core else None
    result = subprocess.run(
        [
            *(sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"),
            *("--profiler", "torch", "--trace-name", name, "prog.py", mode),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=pin,
    )
    assert result.returncode == 0, result.stderr
    return folder / "out" / f"{name}.json"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("spread")
    for name, text in (("prog.py", PROGRAM), ("work.py", WORK), ("spec.yaml", SPEC)):
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


def _dominant(path: Path) -> dict[str, object]:
    found = summarize_trace(path)["structured"]["bottlenecks"]
    return next(row for row in found if row["rule"] == "dominant-marker")  # type: ignore[return-value]


def test_one_slow_call_is_named_as_carrying_the_share(project: Path) -> None:
    finding = _dominant(_record(project, "outlier", "outlier"))
    assert finding["severity"] == "low"
    assert "but 1 of its 20 calls holds" in str(finding["title"])
    assert "median call" in str(finding["title"])
    assert str(finding["recommendation"]).startswith("Look at the longest calls")
    evidence = finding["evidence"]
    assert isinstance(evidence, dict)
    assert evidence["calls_holding_half"] == 1
    assert evidence["longest_call_us"] > 10 * evidence["median_call_us"]


def test_every_slow_call_keeps_the_finding_with_its_spread(project: Path) -> None:
    finding = _dominant(_record(project, "steady", "steady"))
    assert finding["severity"] == "medium"
    assert "(20 calls, median" in str(finding["title"])
    assert str(finding["recommendation"]).startswith("Drill into 'work.step'")


def test_a_run_that_shared_its_core_says_the_machine_was_busy(project: Path) -> None:
    core = {min(os.sched_getaffinity(0))}
    hog = subprocess.Popen(
        [sys.executable, "-c", HOG], preexec_fn=lambda: os.sched_setaffinity(0, core)
    )
    try:
        path = _record(project, "busy", "steady", core)
    finally:
        hog.kill()
        hog.wait()
    summary = summarize_trace(path)
    share = summary["structured"]["trace"].get("cpu_waited_share")
    assert share is not None and share >= machine_wait.CONTENDED_WAIT_SHARE
    assert "**Busy machine:** the program's main thread waited for a CPU" in summary["markdown"]


def test_the_busy_threshold_is_the_sessions() -> None:
    assert machine_wait.CONTENDED_WAIT_SHARE == cpu_wait.CONTENDED_WAIT_SHARE

"""The sidecar says how long the run's main thread waited for a CPU; a session answer from a
contended run is never ``high`` confidence and says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncompass.capture.cpu_wait import CONTENDED_WAIT_SHARE, CpuWaitClock, waited_share
from ncompass.session.answer import Answer
from tests.conftest import REPO

SPIN = """
import time
end = time.perf_counter() + 1.5
while time.perf_counter() < end:
    pass
"""

needs_schedstat = pytest.mark.skipif(
    CpuWaitClock().stop() is None and not os.path.exists("/proc/self/schedstat"),
    reason="no scheduler statistics (not Linux)",
)


def _pinned_to_the_first_cpu() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


@needs_schedstat
def test_a_run_sharing_its_cpu_records_the_wait(tmp_path: Path) -> None:
    """The run and a busy loop pinned to one CPU: the run waits for it about half the time."""
    script = tmp_path / "spin.py"
    script.write_text(SPIN)
    hog = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"], preexec_fn=_pinned_to_the_first_cpu
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ncompass", "run", "--profiler", "torch", "--no-follow",
             "-o", str(tmp_path), "--trace-name", "busy", str(script)],
            env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
            timeout=300, preexec_fn=_pinned_to_the_first_cpu,
        )  # fmt: skip
    finally:
        hog.kill()
        hog.wait()
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "busy.ncompass.json").read_text())["cpu_wait"]
    assert record["wall_s"] > 1.5 and record["ran_s"] > 0
    share = waited_share(record)
    assert share is not None and share >= CONTENDED_WAIT_SHARE, record


def _answer(confidence: str) -> Answer:
    return Answer("m.py", (3, 3), "x = f(x)", "m:f", 10.0, 0.8, 2, confidence)


def test_a_contended_run_caps_the_confidence_and_says_why() -> None:
    busy = {"cpu_wait": {"ran_s": 1.0, "waited_s": 0.8, "wall_s": 2.0}}
    answer = _answer("high").under_contention(busy)
    assert answer.confidence == "medium" and answer.contended
    assert "waited for a CPU 40% of the run" in answer.describe()
    assert Answer.from_dict(answer.to_dict()).cpu_waited_share == pytest.approx(0.4)
    # a tie stays a tie; a quiet run, or one that did not measure, keeps its confidence
    assert _answer("tie").under_contention(busy).confidence == "tie"
    quiet = {"cpu_wait": {"ran_s": 1.0, "waited_s": 0.01, "wall_s": 1.01}}
    assert _answer("high").under_contention(quiet).confidence == "high"
    assert _answer("high").under_contention({}).confidence == "high"
    assert "busy" not in _answer("high").under_contention(quiet).describe()

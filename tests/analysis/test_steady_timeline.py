"""The page's timeline starts where the program starts working; the whole run is one click away.

A real run under ``ncompass run --profiler torch`` whose first 1.5 s are setup (a slow import)
before ten 10 ms marker calls: drawn to scale, the calls were the right twelfth of the timeline.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ncompass.analysis.html_page import render_html
from ncompass.analysis.steady_timeline import first_active_bin, steady_timeline
from ncompass.analysis.summary import summarize_trace

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import time

import torch

time.sleep(1.5)  # a slow import: setup before the profiled code
import work

for _ in range(10):
    work.step()
"""

WORK = """
import time


def step():
    time.sleep(0.01)
"""

SPEC = """
version: 1
targets:
  - module: work
    functions:
      - qualname: step
        name: work.step
"""


@pytest.fixture(scope="module")
def slow_start(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("slow_start")
    for name, text in (("prog.py", PROGRAM), ("work.py", WORK), ("spec.yaml", SPEC)):
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(REPO)]))
    result = subprocess.run(
        [
            *(sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"),
            *("--profiler", "torch", "--trace-name", "t", "prog.py"),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return folder / "out" / "t.json"


def test_setup_is_folded_out_of_the_default_timeline(slow_start: Path) -> None:
    summary = summarize_trace(slow_start)
    timeline = summary["structured"]["timeline"]
    first = first_active_bin(timeline)
    assert first > 0.5 * len(timeline["busy"])  # the premise: setup fills most of the run
    steady = steady_timeline(timeline)
    assert steady is not None
    cropped, folded = steady
    assert folded >= 1.4e6  # the 1.5 s sleep, less at most a bin
    assert cropped["busy"] == timeline["busy"][first:]
    assert cropped["end_us"] == timeline["end_us"]
    (lane,) = [lane for lane in cropped["lanes"] if lane["name"] == "work.step"]
    assert min(start for start, _ in lane["ranges"]) >= 0
    html = render_html(summary)
    assert "Setup folded: the first" in html
    shown, whole = html.index('<div class="steady-timeline">'), html.index("<details")
    assert shown < whole  # the steady state is drawn first, the whole run behind one click
    assert re.search(r"<summary>Show the whole run, setup included</summary><svg", html)


def test_a_run_without_leading_setup_is_drawn_whole() -> None:
    rank0 = Path(__file__).resolve().parents[1] / "data/traces/hta/trace_filter"
    summary = summarize_trace(rank0 / "sampled_rank-0.json.gz")
    assert steady_timeline(summary["structured"]["timeline"]) is None
    assert "Setup folded" not in render_html(summary)

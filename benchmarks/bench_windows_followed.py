"""What a recording window costs a followed child: its peak memory outside the window.

    python benchmarks/bench_windows_followed.py [--calls 20000] [--runs 1]

The run's script starts one ``spawn`` child that calls a small marked step (one tensor op)
``--calls`` times and reports its own peak RSS (``getrusage``) when it ends. Side by side, in
fresh ``ncompass run`` processes, interleaved, median of ``--runs``:

- ``none``: ``--profiler none``, markers idle: the baseline;
- ``window``: ``--window step:FIRST:3`` with FIRST 1,000 calls before the end: the child
  counts its calls, prepares the profiler one call before the window, records three calls.

Prints each child's peak RSS and the run's wall time, and checks that the window's trace
holds exactly three steps on the child's track. Goal: the child's peak RSS within ~50 MB of
``none`` (nothing is buffered outside the window).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

WORK = """
import resource
import sys

import torch


def step(x):
    return x + 1


def calls(n, report):
    x = torch.zeros(1)
    for _ in range(n):
        x = step(x)
    with open(report, "w") as stream:
        stream.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))  # KiB
"""

MAIN = """
import multiprocessing
import sys

import work

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(
        target=work.calls, args=(int(sys.argv[1]), sys.argv[2])
    )
    child.start()
    child.join()
"""

SPEC = """version: 1
targets:
  - module: work
    functions:
      - qualname: step
        name: step
"""


def _run(folder: Path, calls: int, mode: str, index: int) -> tuple[float, float]:
    """One run: the child's peak RSS (MB) and the run's wall time (s)."""
    report = folder / f"rss-{mode}-{index}"
    name = f"{mode}-{index}"
    options = ["--profiler", "none"] if mode == "none" else ["--window", f"step:{calls - 1000}:3"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])}
    started = time.perf_counter()
    subprocess.run(
        [
            *(sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"),
            *("--trace-name", name, *options, "main.py", str(calls), str(report)),
        ],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - started
    if mode == "window":
        trace = json.loads((folder / "out" / f"{name}-w1.json").read_text())
        child = trace["ncompass_processes"][1]["pid"]
        steps = [
            event
            for event in trace["traceEvents"]
            if event.get("cat") == "user_annotation" and event.get("name") == "step"
        ]
        assert len(steps) == 3 and all(event["pid"] == child for event in steps), len(steps)
    return int(report.read_text()) / 1024, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=1)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        (folder / "work.py").write_text(WORK)
        (folder / "main.py").write_text(MAIN)
        (folder / "spec.yaml").write_text(SPEC)
        results: dict[str, list[tuple[float, float]]] = {"none": [], "window": []}
        for index in range(arguments.runs):
            for mode in results:
                results[mode].append(_run(folder, arguments.calls, mode, index))
    rss = {mode: statistics.median(r for r, _ in runs) for mode, runs in results.items()}
    wall = {mode: statistics.median(w for _, w in runs) for mode, runs in results.items()}
    first = arguments.calls - 1000
    print(f"a spawn child calling a marked step {arguments.calls:,} times")
    print(f"{'':28}{'child peak RSS':>16}{'run wall time':>16}")
    for mode, label in (("none", "--profiler none"), ("window", f"--window step:{first}:3")):
        print(f"{label:28}{rss[mode]:>13.0f} MB{wall[mode]:>14.1f} s")
    print(
        f"window - none: {rss['window'] - rss['none']:+.0f} MB peak RSS (goal: within ~50 MB); "
        f"wall time x{wall['window'] / wall['none']:.2f}"
    )


if __name__ == "__main__":
    main()

"""The cost of the efficiency pass (FLOPs, bytes, roofline) on top of ``summarize``.

    python benchmarks/bench_efficiency.py [--size-mb 500] [--runs 3]

The trace is HTA's sampled A100 rank (``trace_filter/sampled_rank-0``: recorded with shapes,
GEMM kernels linked to their ops) repeated to ``--size-mb`` MB of JSON by
``benchmarks/traces/make_trace.py`` (gzip level 1, built once under ``benchmarks/.data``).
Each run is a fresh child process timing ``summarize_trace`` with the efficiency figures off
("summarize") and on ("+ efficiency"), interleaved; medians over ``--runs``. The goal is an
efficiency pass of at most 10 % on top of summarize. The machine's load average is printed
beside the figures, since the two sides share the machine with whatever else runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from repeated_trace import DATA, HERE, repeated_trace

SOURCE = (
    HERE.parent / "tests" / "data" / "traces" / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
)

_CHILD = r"""
import sys, time
from ncompass.analysis.summary import summarize_trace
path, efficiency = sys.argv[1], sys.argv[2] == "1"
start = time.perf_counter()
summary = summarize_trace(path, jobs=1, efficiency=efficiency, peak_flops=312e12,
                          peak_bandwidth=2.0e12)
print(time.perf_counter() - start)
"""


def _seconds(path: Path, efficiency: bool) -> float:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), "1" if efficiency else "0"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=500.0)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    trace = repeated_trace(SOURCE, DATA / f"shaped_{options.size_mb:g}mb.json.gz", options.size_mb)
    plain: list[float] = []
    full: list[float] = []
    for _ in range(options.runs):
        plain.append(_seconds(trace, False))
        full.append(_seconds(trace, True))
    before, after = statistics.median(plain), statistics.median(full)
    load = os.getloadavg()
    print(f"trace {trace.name}: {options.size_mb:g} MB of JSON, {options.runs} runs, medians")
    print(f"summarize:              {before:.2f} s")
    print(f"summarize + efficiency: {after:.2f} s")
    print(f"efficiency pass: +{100 * (after / before - 1):.1f}% (goal: at most 10%)")
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

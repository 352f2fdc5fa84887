"""Peak memory of reading a trace, per kind of trace, over the trace's size.

    python benchmarks/bench_reader_memory.py [--mb 100] [--kinds header,markers,kernels]
                                             [--ncompass PATH]

Each kind is generated at about ``--mb`` MB of JSON (nothing large is committed) and summarized
(``summarize_trace``, which links the trace) in a fresh child process, which reports its CPU
time and its peak RSS since exec (``VmHWM``). Printed per kind: the size, the CPU seconds, the
peak, the peak over the size, and the growth (the peak less that of the same kind at 0.05 MB:
the interpreter, the imports, constant buffers) over the size. The kinds:

- ``header``: one metadata value before ``traceEvents`` (an object of many short keys, as a
  damaged or hostile ``distributedInfo`` would be), then one marker;
- ``markers``: markers only (``user_annotation`` ranges), all on one line, 100 names;
- ``kernels``: Kineto-like launches, kernels and flow events, every kernel name distinct (what
  ``tests/analysis/test_memory.py`` bounds at 0.5 of the size).

``--ncompass PATH`` runs the children on another checkout (a worktree of main, for before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.traces.trace_kinds import write_trace  # noqa: E402  (the same traces as the tests)

_CHILD = r"""
import json, sys, time
start = time.process_time()
from ncompass.analysis.summary import summarize_trace
summarize_trace(sys.argv[1])
seconds = time.process_time() - start
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "peak_mb": peak_kb / 1024}))
"""


def measure(path: Path, checkout: Path) -> dict[str, float]:
    """CPU seconds and peak MB of summarizing ``path`` in a fresh process."""
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=path.parent,  # not the checkout this script is in: `-c` puts the cwd on sys.path
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="size of each trace, MB")
    parser.add_argument("--kinds", default="header,markers,kernels")
    parser.add_argument("--ncompass", type=Path, default=REPO, help="checkout to measure")
    options = parser.parse_args()
    print(f"{'kind':<8} {'MB':>7} {'CPU s':>7} {'peak MB':>8} {'peak/size':>9} {'grown/size':>10}")
    with tempfile.TemporaryDirectory(prefix="bench-reader-memory-") as folder:
        for kind in options.kinds.split(","):
            small = measure(write_trace(Path(folder) / "small.json", kind, 0.05), options.ncompass)
            trace = write_trace(Path(folder) / f"{kind}.json", kind, options.mb)
            size_mb = trace.stat().st_size / 1e6
            large = measure(trace, options.ncompass)
            trace.unlink()
            peak_ratio = large["peak_mb"] * 1.048576 / size_mb
            grown_ratio = (large["peak_mb"] - small["peak_mb"]) * 1.048576 / size_mb
            print(
                f"{kind:<8} {size_mb:>7.0f} {large['seconds']:>7.1f} {large['peak_mb']:>8.0f} "
                f"{peak_ratio:>9.2f} {grown_ratio:>10.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

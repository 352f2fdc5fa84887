"""Run every benchmark, one after the other (``make bench``); each prints its peer and ratios.

Benchmarks compete for the CPU, so they never run at the same time. ``--quick`` passes each
benchmark its own quick option where it has one. The trace benchmark installs Holistic Trace
Analysis into its own virtual environment on first use (a few minutes); the kernel benchmark
needs the ``kernels`` extra and the remote one the ``remote`` extra (``make`` installs both).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHMARKS: list[tuple[str, list[str], list[str]]] = [
    # (script, normal arguments, --quick arguments)
    ("bench_import.py", [], ["--repeats", "5"]),
    ("bench_markers.py", [], ["--quick"]),
    ("bench_gpu_monitor.py", [], ["--quick"]),
    ("bench_traces.py", [], ["--runs", "1", "--no-scaling"]),
    ("bench_trace_passes.py", [], ["--runs", "1", "--size-mb", "54"]),
    ("bench_trace_jobs.py", [], ["--runs", "1", "--size-mb", "20"]),
    ("bench_nvtx_trace.py", [], ["--runs", "2", "--calls", "20000", "--steps", "20000"]),
    ("bench_kernels.py", [], ["--quick"]),
    ("bench_remote.py", [], ["--quick"]),
    ("bench_compile_attribution.py", [], ["--quick"]),
    ("bench_windows.py", [], ["--quick"]),
    ("bench_session.py", [], ["--quick", "--naive-runs", "2"]),
    ("bench_setup_spans.py", ["--summarize-mb", "60"], ["--rounds", "3"]),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("names", nargs="*", help="only these benchmarks (e.g. import markers)")
    args = parser.parse_args()
    failed = []
    for script, normal, quick in BENCHMARKS:
        if args.names and not any(name in script for name in args.names):
            continue
        print(f"\n=== {script} ===", flush=True)
        start = time.perf_counter()
        command = [sys.executable, str(HERE / script), *(quick if args.quick else normal)]
        if subprocess.run(command, check=False).returncode != 0:
            failed.append(script)
        print(f"({time.perf_counter() - start:.0f} s)", flush=True)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

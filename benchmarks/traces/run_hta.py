"""Child process of the benchmark, run in HTA's own venv: HTA's temporal breakdown, timed."""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
import time


def main() -> None:
    path = sys.argv[1]
    started = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.WARNING)  # HTA logs a warning per ns-resolution trace
    analysis = TraceAnalysis(
        trace_files={0: os.path.basename(path)}, trace_dir=os.path.dirname(os.path.abspath(path))
    )
    frame = analysis.get_temporal_breakdown(visualize=False)
    elapsed = time.perf_counter() - started
    row = frame.iloc[0]
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "self_peak_kb": peak_rss_kb(),
                "children_peak_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                "kernel_span_us": float(row["kernel_time(us)"]),
                "idle_us": float(row["idle_time(us)"]),
                "compute_us": float(row["compute_time(us)"]),
                "non_compute_us": float(row["non_compute_time(us)"]),
            }
        )
    )


def peak_rss_kb() -> int:
    """This process's own peak RSS since exec (VmHWM): unlike ru_maxrss, it does not include
    the memory of the parent it was forked from."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    main()

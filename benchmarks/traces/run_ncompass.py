"""Child process of the benchmark: ncompass's breakdown of one trace, timed, as one JSON line."""

from __future__ import annotations

import json
import resource
import sys
import time


def main() -> None:
    path, exclude_last_step = sys.argv[1], sys.argv[2] == "exclude-last-step"
    options = sys.argv[3:]
    if "without-msgspec" in options:
        sys.modules["msgspec"] = None  # type: ignore[assignment]  # as if not installed
    if "without-native" in options or "without-msgspec" in options:
        sys.modules["ncompass.traces._fold"] = None  # type: ignore[assignment]  # as if not built
    jobs = next((int(option[5:]) for option in options if option.startswith("jobs=")), 1)
    started = time.perf_counter()
    cpu_started = time.process_time()
    from ncompass.analysis import breakdown

    result = breakdown(
        [path], exclude_last_profiler_step=exclude_last_step, progress=False, jobs=jobs
    )
    elapsed = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    rank = result.ranks[0]
    print(
        json.dumps(
            {
                "seconds": elapsed,
                # this process and its worker processes (split traces), on every core
                "cpu_seconds": time.process_time()
                - cpu_started
                + children.ru_utime
                + children.ru_stime,
                "self_peak_kb": peak_rss_kb(),
                "children_peak_kb": children.ru_maxrss,
                "kernel_span_us": rank.kernel_span_us,
                "idle_us": rank.idle_us,
                "compute_us": rank.compute_us,
                "non_compute_us": rank.non_compute_us,
                "gpu_events": rank.gpu_events,
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

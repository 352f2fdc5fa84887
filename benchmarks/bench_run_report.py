"""The per-process report of a run's trace: what it costs, and that one-process traces pay nothing.

    python benchmarks/bench_run_report.py --baseline /path/to/other/checkout [--runs 3]
        [--size-mb 250]

Two measurements, each tool in a fresh child process, interleaved run by run, medians:

1. ``summarize`` of one large single-process trace (built reproducibly under
   ``benchmarks/.data`` by ``benchmarks/traces/make_trace.py``, plain JSON) with this checkout
   and with ``--baseline`` (another checkout of ncompass, such as the commit before the
   per-process report, with its C extensions built) side by side: CPU seconds and peak RSS,
   and their ratios. Reading and linking must cost the same per event.
2. ``summarize`` of a run's trace of two processes (the same source twice, as two pids listed
   under ``ncompass_processes``) against the same file without the list (the total only): what
   the per-process and per-rank report adds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / ".data"
SOURCE = REPO / "tests" / "data" / "traces" / "hta" / "ns_resolution_trace"

# The measured child: summarize one trace in one process, report CPU time and peak RSS.
_CHILD = r"""
import json, resource, sys, time
cpu = time.process_time()
from ncompass.analysis.summary import summarize_trace
summary = summarize_trace(sys.argv[1], progress=False, jobs=1)
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"cpu_seconds": time.process_time() - cpu, "peak_mb": peak / 1024,
                  "processes": len(summary["structured"].get("run", {}).get("processes", []))}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", type=Path, required=True, help="another ncompass checkout")
    parser.add_argument("--runs", type=int, default=3, help="runs per side (median reported)")
    parser.add_argument("--size-mb", type=float, default=250.0, help="single-process trace size")
    arguments = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    large = plain_trace(arguments.size_mb)
    side_by_side(
        f"summarize, one process, {arguments.size_mb:g} MB of JSON",
        {"this checkout": (REPO, large), "baseline": (arguments.baseline.resolve(), large)},
        arguments.runs,
    )
    run, total_only = run_traces(plain_trace(54.0))
    side_by_side(
        "summarize, a run's trace of two processes (2 x 54 MB)",
        {"per process and rank": (REPO, run), "total only": (REPO, total_only)},
        arguments.runs,
    )


def plain_trace(size_mb: float) -> Path:
    """A plain-JSON trace of about ``size_mb``, built once from the shared real trace."""
    path = DATA / f"run-report-{size_mb:g}MB.json"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        source = sorted(SOURCE.glob("*.json.gz"))[0]
        compressed = path.with_suffix(".json.gz.partial")
        subprocess.run(
            [
                sys.executable,
                str(HERE / "traces" / "make_trace.py"),
                str(source),
                str(compressed),
                "--size-mb",
                str(size_mb),
                "--level",
                "1",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run(f"gzip -dc {compressed} > {path}.partial", shell=True, check=True)
        compressed.unlink()
        Path(f"{path}.partial").replace(path)
    return path


def run_traces(source: Path) -> tuple[Path, Path]:
    """A run's trace of two processes (``source`` twice, the second with another pid), and
    the same without ``ncompass_processes``."""
    run, total_only = DATA / "run-report-run.json", DATA / "run-report-total.json"
    if run.exists() and total_only.exists():
        return run, total_only
    trace = orjson.loads(source.read_bytes())
    events = trace["traceEvents"]
    pids = sorted({e["pid"] for e in events if e.get("cat") == "cpu_op"})
    second: list[dict[str, Any]] = []
    for event in events:
        copy = dict(event)
        if copy.get("pid") in pids:
            copy["pid"] = copy["pid"] + 1_000_000
        args = copy.get("args")
        if isinstance(args, dict) and isinstance(args.get("correlation"), int):
            copy["args"] = {**args, "correlation": args["correlation"] + 10**12}
        second.append(copy)
    trace["traceEvents"] = events + second
    trace["ncompass_processes"] = [
        {"pid": pids[0], "ppid": 1, "rank": 0, "role": "rank 0", "command": "train.py"},
        {"pid": pids[0] + 1_000_000, "ppid": pids[0], "rank": 1, "role": "rank 1", "command": ""},
    ]
    run.write_bytes(orjson.dumps(trace))
    del trace["ncompass_processes"]
    total_only.write_bytes(orjson.dumps(trace))
    return run, total_only


def side_by_side(title: str, sides: dict[str, tuple[Path, Path]], runs: int) -> None:
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for _ in range(runs):
        for name, (checkout, trace) in sides.items():
            results[name].append(measure(checkout, trace))
    print(f"\n{title} (medians of {runs}, interleaved):")
    print(f"{'':>22} {'wall (s)':>9} {'CPU (s)':>8} {'peak (MB)':>10}  CPU s of each run")
    for name, measured in results.items():
        each = " ".join(f"{run['cpu_seconds']:.2f}" for run in measured)
        print(
            f"{name:>22} {median(measured, 'wall_seconds'):>9.2f} "
            f"{median(measured, 'cpu_seconds'):>8.2f} {median(measured, 'peak_mb'):>10.0f}  {each}"
        )
    first, second = (results[name] for name in sides)
    cpu = median(first, "cpu_seconds") / median(second, "cpu_seconds")
    peak = median(first, "peak_mb") / median(second, "peak_mb")
    print(f"{'ratio':>22} {'':>9} {cpu:>8.3f} {peak:>10.3f}")


def measure(checkout: Path, trace: Path) -> dict[str, Any]:
    started = time.perf_counter()
    output = subprocess.run(
        [sys.executable, "-c", _CHILD, str(trace)],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    result["wall_seconds"] = time.perf_counter() - started
    return result


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


if __name__ == "__main__":
    main()

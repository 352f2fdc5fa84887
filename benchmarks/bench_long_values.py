"""Traces holding one very long value, or many kernels: ncompass's memory and time, with peers.

    python benchmarks/bench_long_values.py [--runs 1] [--names 1,2,4,8,16] [--tops 50,100]
                                           [--kernels-mb 100,200,400] [--ncompass PATH]

Each trace is small but for one value: an event whose ``name`` is 1..16 MiB long, or a
``deviceProperties`` key before the events of 50 or 100 MB. A streaming reader must take such a
value in time linear in its length and in memory of a few times it (the goal: a 16 MiB name in
under 1 s, peak memory within 3x the value plus a constant). Each run is a fresh child process
that reports its CPU time and its peak RSS since exec (``VmHWM``); the peer, the standard
library's ``json.load`` of the whole file, runs the same way, interleaved. Medians over
``--runs``; "x value" is the peak, less that of summarizing the same trace with an empty name, over
the value's size.

``--kernels-mb`` measures, instead, traces made of GPU kernels (what memory grows with), of each
size given:
Kineto-like kernels with their launches and flow events whose names are 50 in all or all
distinct, and minimal kernel and launch events (a quarter of the text per kernel).
``summarize`` and ``breakdown`` of each report their CPU time and their peak in MB per MB of
JSON (goal: at most 0.5), of the whole process and above the same command's peak on a 50 KB
trace of the same kind (the interpreter, the imports and constant buffers: about 26 MB);
``json.load`` is the peer. ``--ncompass PATH`` runs the children on another checkout of
ncompass (e.g. a worktree of the main branch, for before/after numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_SECONDS_AT_16_MIB = 1.0
GOAL_MEMORY_TIMES_VALUE = 3.0
GOAL_MB_PER_MB = 0.5

_CHILD = r"""
import json, resource, sys, time
tool, path = sys.argv[1], sys.argv[2]
start = time.process_time()
if tool == "ncompass":
    from ncompass.analysis.summary import summarize_trace
    summarize_trace(path)
elif tool == "breakdown":
    from ncompass.analysis.breakdown import breakdown
    breakdown([path])
else:
    with open(path, "rb") as handle:
        json.load(handle)
seconds = time.process_time() - start
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "peak_mb": peak_kb / 1024}))
"""


def long_name_trace(folder: Path, mib: int) -> Path:
    """A few events, one of them a kernel whose name is ``mib`` MiB of ASCII."""
    path = folder / f"name-{mib}mib.json"
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0,
         "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10, "dur": 2, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "LONG", "pid": 0, "tid": 7, "ts": 20, "dur": 5,
         "args": {"correlation": 1}},
    ]  # fmt: skip
    text = json.dumps({"traceEvents": events})
    path.write_text(text.replace('"LONG"', '"' + "k" * (mib << 20) + '"'))
    return path


def long_top_key_trace(folder: Path, megabytes: int) -> Path:
    """A ``deviceProperties`` key of ``megabytes`` MB before a few events."""
    path = folder / f"top-{megabytes}mb.json"
    events = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]
    with open(path, "w") as handle:
        handle.write('{"deviceProperties": [{"name": "')
        handle.write("p" * (megabytes * 1_000_000))
        handle.write('"}], "traceEvents": ' + json.dumps(events) + "}")
    return path


def kernel_trace(folder: Path, megabytes: float, shape: str) -> Path:
    """About ``megabytes`` MB of kernels: ``few`` or ``distinct`` names (Kineto-like events),
    or ``minimal`` events."""
    path = folder / f"kernels-{shape}-{megabytes:g}mb.json"
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
            "ts": 0, "dur": 10**9}  # fmt: skip
    with open(path, "w") as out:
        out.write('{"schemaVersion": 1, "traceEvents": [\n' + json.dumps(step))
        written = index = 0
        while written < megabytes * 1_000_000:
            text = "".join(",\n" + json.dumps(event) for event in _kernel(index, shape))
            out.write(text)
            written += len(text)
            index += 1
        out.write("\n]}\n")
    return path


def _kernel(index: int, shape: str) -> list[dict[str, object]]:
    ts = 10 + index * 10
    if shape == "minimal":
        return [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts, "dur": 1, "args": {"correlation": index}},
            {"ph": "X", "cat": "kernel", "name": f"gemm_{index % 20}", "pid": 0, "tid": 7,
             "ts": ts + 1, "dur": 1, "args": {"correlation": index}},
        ]  # fmt: skip
    suffix = index if shape == "distinct" else index % 50
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    name += f"std::array<char*, 3ul> >(int, {suffix})"
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": ts, "dur": 4, "args": {"External id": index, "cbid": 211, "correlation": index}},
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 5, "dur": 3,
         "args": {"External id": index, "queued": 0, "device": 0, "context": 1, "stream": 7,
                  "correlation": index, "registers per thread": 16, "shared memory": 0,
                  "blocks per SM": 0.5, "warps per SM": 2.0, "grid": [40, 1, 1],
                  "block": [128, 1, 1], "est. achieved occupancy %": 3}},
        {"ph": "s", "id": index, "pid": 1, "tid": 1, "ts": ts, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": index, "pid": 0, "tid": 7, "ts": ts + 5, "cat": "ac2g",
         "name": "ac2g", "bp": "e"},
    ]  # fmt: skip


def run_child(tool: str, path: Path, checkout: Path = REPO) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, tool, str(path)],
        capture_output=True,
        text=True,
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--names", default="1,2,4,8,16", help="MiB of the long names")
    parser.add_argument("--tops", default="50,100", help="MB of the long top-level keys")
    parser.add_argument("--kernels-mb", default="", help="MB of the kernel traces, e.g. 100,200")
    parser.add_argument("--ncompass", type=Path, default=REPO, help="checkout of ncompass to run")
    options = parser.parse_args()
    header = f"{'trace':<14}{'value MB':>9}{'ncompass s':>11}{'json s':>8}{'ratio':>7}"
    header += f"{'ncompass MB':>12}{'json MB':>9}{'x value':>8}"
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        if options.kernels_mb:
            for megabytes in options.kernels_mb.split(","):
                kernel_table(folder, float(megabytes), options.runs, options.ncompass)
            return
        baseline = run_child("ncompass", long_name_trace(folder, 0))["peak_mb"]
        print(f"ncompass summarizing the same trace with an empty name: {baseline:.0f} MB")
        print(header)
        cases = [(long_name_trace, int(mib), "MiB name") for mib in options.names.split(",")]
        cases += [(long_top_key_trace, int(mb), "MB key") for mb in options.tops.split(",")]
        for make, size, unit in cases:
            path = make(folder, size)
            value_mb = size * (1 << 20 if unit == "MiB name" else 1_000_000) / 1e6
            runs: dict[str, list[dict[str, float]]] = {"ncompass": [], "json": []}
            for _ in range(options.runs):
                for tool in runs:
                    runs[tool].append(run_child(tool, path))
            median = {
                tool: {key: statistics.median(run[key] for run in measured) for key in measured[0]}
                for tool, measured in runs.items()
            }
            ours, peer = median["ncompass"], median["json"]
            times_value = (ours["peak_mb"] - baseline) / (value_mb / 1.048576)
            print(
                f"{f'{size} {unit}':<14}{value_mb:>9.1f}{ours['seconds']:>11.2f}"
                f"{peer['seconds']:>8.2f}{ours['seconds'] / max(peer['seconds'], 1e-3):>7.1f}"
                f"{ours['peak_mb']:>12.0f}{peer['peak_mb']:>9.0f}{times_value:>8.1f}"
            )
            path.unlink()
    print(
        f"goals: a 16 MiB name in < {GOAL_SECONDS_AT_16_MIB:.0f} s; peak within "
        f"{GOAL_MEMORY_TIMES_VALUE:.0f}x the value (above the interpreter) plus a constant; "
        f"kernel traces at most {GOAL_MB_PER_MB} MB per MB of JSON"
    )


def kernel_table(folder: Path, megabytes: float, runs: int, checkout: Path) -> None:
    """Peak MB per MB of JSON (whole process, and above a 50 KB trace's) and CPU seconds of
    summarize, breakdown and json.load on kernel traces of ``megabytes`` MB."""
    print(
        f"\n{'kernels':<10}{'MB':>5}  tool: peak MiB, per byte of JSON (whole; above 50 KB), CPU s"
    )
    for shape in ("few", "distinct", "minimal"):
        path = kernel_trace(folder, megabytes, shape)
        tiny = kernel_trace(folder, 0.05, shape)
        size = path.stat().st_size / 1e6
        cells = []
        for tool in ("ncompass", "breakdown", "json"):
            floor = run_child(tool, tiny, checkout)["peak_mb"]
            measured = [run_child(tool, path, checkout) for _ in range(runs)]
            peak = statistics.median(run["peak_mb"] for run in measured)
            seconds = statistics.median(run["seconds"] for run in measured)
            above = (peak - floor) * 1.048576 / size  # MiB of RSS, MB of JSON
            label = "summarize" if tool == "ncompass" else tool
            cells.append(
                f"{label}: {peak:.0f} MiB, {peak * 1.048576 / size:.2f} ({above:.2f}), "
                f"{seconds:.2f} s"
            )
        print(f"{shape:<10}{size:>5.0f}  " + "; ".join(cells), flush=True)
        path.unlink()
        tiny.unlink()


if __name__ == "__main__":
    main()

"""What ``--profiler nvtx-trace`` costs on the demo, and how fast ``ncompass convert`` is.

    python benchmarks/bench_nvtx_trace.py [--runs N] [--tokens N] [--calls N] [--steps N,M]

1. The demo (``examples/tiny_transformer.py`` with ``configs/attn.yaml``), run by
   ``ncompass run`` under each profiler, interleaved, median of ``--runs``:

   - ``nvtx``: markers are NVTX ranges and no tool is attached (they do nothing): the baseline;
   - ``nvtx-trace``: the ncompass NVTX recorder attached to a re-executed child;
   - ``torch``: the PyTorch profiler, the peer.

   It prints the demo's own generation time (what the markers slow down) and the whole
   command's wall time (re-execution and conversion included).
2. A function called ``--calls`` times in a loop, with an ``nvtx`` marker, under ``nvtx`` and
   ``nvtx-trace``: the recording cost per NVTX event (a push or a pop), end to end through
   ncompass' markers, best of ``--runs`` (the least disturbed run on a shared machine).
3. ``ncompass convert`` on synthetic Nsight Systems exports of two sizes (training steps with
   nested ranges, launches and slightly overlapping kernels), each in a fresh process: time,
   rows and events per second, and peak RSS, which should not grow with the report.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROFILERS = ("nvtx", "nvtx-trace", "torch")
_GENERATED = re.compile(r"generated \d+ tokens x \d+ in ([0-9.]+) s")
_LOOP = re.compile(r"loop ([0-9.]+)")

# A function called in a tight loop, wrapped by a marker: the per-event cost without the noise
# of a model around it.
LOOP_SCRIPT = """
import sys, time

def tick():
    pass

calls = int(sys.argv[1])
start = time.perf_counter()
for _ in range(calls):
    tick()
print(f"loop {time.perf_counter() - start:.6f}")
"""
LOOP_SPEC = """version: 1
context: nvtx
targets:
  - file: loop.py
    functions:
      - qualname: tick
        name: loop.tick
"""

# ru_maxrss would include the parent's memory at fork; VmHWM is this process' own peak.
CONVERT = """
import re, sys, time
from pathlib import Path
from ncompass.traces.nsys import convert_report
start = time.perf_counter()
result = convert_report(sys.argv[1], sys.argv[2])
elapsed = time.perf_counter() - start
peak_kib = re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)
print(elapsed, peak_kib, result.stats.events)
"""


def ncompass_run(profiler: str, folder: Path, run_args: list[str]) -> tuple[str, float]:
    """``ncompass run --profiler PROFILER ...``: its standard output and wall time."""
    command = [sys.executable, "-m", "ncompass", "run", "--profiler", profiler]
    command += ["--output-dir", str(folder), "--trace-name", profiler, *run_args]
    # one torch thread: on a shared machine, spinning intra-op threads make timings erratic
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True, env=env)
    return done.stdout, time.perf_counter() - start


def recorded_events(trace: Path) -> int:
    """NVTX events in a recorder trace: a push/pop range is two, a start/end pair two."""
    events = json.loads(trace.read_bytes())["traceEvents"]
    return sum(2 if e.get("ph") == "X" else 1 for e in events if e.get("ph") in "Xbei")


def bench_demo(runs: int, tokens: int) -> None:
    demo = ["--config", "configs/attn.yaml", "examples/tiny_transformer.py"]
    demo += ["--new-tokens", str(tokens)]
    generation: dict[str, list[float]] = {name: [] for name in PROFILERS}
    command: dict[str, list[float]] = {name: [] for name in PROFILERS}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ncompass_run("nvtx-trace", folder, demo)  # builds the recorder, warms the caches
        for _ in range(runs):
            for profiler in PROFILERS:
                stdout, wall = ncompass_run(profiler, folder, demo)
                match = _GENERATED.search(stdout)
                assert match, stdout
                generation[profiler].append(float(match.group(1)))
                command[profiler].append(wall)
        events = recorded_events(folder / "nvtx-trace.json")
    baseline = statistics.median(generation["nvtx"])
    print(f"demo: {tokens} new tokens, attn.yaml markers; median of {runs} interleaved runs")
    print(f"{'profiler':<12}{'generation':>12}{'x nvtx':>8}{'command':>10}")
    for profiler in PROFILERS:
        value = statistics.median(generation[profiler])
        wall = statistics.median(command[profiler])
        print(f"{profiler:<12}{value * 1000:>10.1f}ms{value / baseline:>8.2f}{wall:>9.2f}s")
    print(f"nvtx-trace recorded {events} NVTX events")


def bench_loop(runs: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "loop.py").write_text(LOOP_SCRIPT)
        (folder / "loop.yaml").write_text(LOOP_SPEC)
        loop = ["--config", str(folder / "loop.yaml"), str(folder / "loop.py"), str(calls)]
        times: dict[str, list[float]] = {"nvtx": [], "nvtx-trace": []}
        for _ in range(runs):
            for profiler in times:
                stdout, _ = ncompass_run(profiler, folder, loop)
                match = _LOOP.search(stdout)
                assert match, stdout
                times[profiler].append(float(match.group(1)))
        events = recorded_events(folder / "nvtx-trace.json")
    idle = min(times["nvtx"])  # least disturbed run of each: the intrinsic cost
    recorded = min(times["nvtx-trace"])
    print(f"\nmarker loop: {calls} calls of a function with an nvtx marker; best of {runs}")
    print(f"  no tool attached: {idle * 1e9 / calls:.0f} ns per call")
    print(f"  recorder attached: {recorded * 1e9 / calls:.0f} ns per call, {events} events")
    print(f"  recording costs {(recorded - idle) * 1e9 / events:.1f} ns per NVTX event")


def synthetic_export(path: Path, steps: int) -> int:
    """Write an export of ``steps`` training steps; returns its row count."""
    from tests.nsys.report_builder import ReportBuilder

    builder = ReportBuilder(path)
    rows = []
    runtime = []
    kernels = []
    launch_name = builder.string("cudaLaunchKernel_v7000")
    names = [builder.string(f"void k{k}<float>(float*)") for k in range(4)]
    correlation = 0
    tid = (1 << 24) | 1
    for step in range(steps):
        base = step * 20_000
        rows.append((base, base + 19_000, 59, f"step {step % 100}", tid))
        rows.append((base + 100, base + 15_000, 59, "forward", tid))
        for k in range(4):
            correlation += 1
            start = base + 200 + k * 3_000
            runtime.append((start, start + 100, 1, tid, correlation, launch_name, 0))
            # consecutive kernels overlap slightly, as on a real GPU
            kernels.append((start + 500, start + 3_700, correlation, names[k]))
    builder.db.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?,?,?,?,?)",
        rows,
    )
    builder.db.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, ?, NULL)", runtime
    )
    builder.db.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
        "correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY, "
        "gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
        "localMemoryPerThread, localMemoryTotal, gridId) "
        f"VALUES (?, ?, 0, 1, 7, ?, {1 << 24}, ?, ?, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0)",
        [(s, e, c, n, n) for s, e, c, n in kernels],
    )
    builder.close()
    return len(rows) + len(runtime) + len(kernels)


def bench_convert(step_counts: list[int]) -> None:
    print("\nncompass convert: synthetic exports (2 ranges, 4 launches, 4 kernels per step)")
    print(
        f"{'steps':>8}{'rows':>10}{'MB in':>8}{'seconds':>9}{'rows/s':>10}{'events':>9}"
        f"{'MB out':>8}{'peak RSS':>10}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for steps in step_counts:
            export = Path(tmp) / f"steps{steps}.sqlite"
            rows = synthetic_export(export, steps)
            output = Path(tmp) / f"steps{steps}.json.gz"
            done = subprocess.run(
                [sys.executable, "-c", CONVERT, str(export), str(output)],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            seconds, peak_kib, events = done.stdout.split()
            elapsed = float(seconds)
            out_mb = len(gzip.decompress(output.read_bytes())) / 1e6
            print(
                f"{steps:>8}{rows:>10}{export.stat().st_size / 1e6:>8.1f}{elapsed:>9.2f}"
                f"{rows / elapsed:>10.0f}{int(events):>9}{out_mb:>8.1f}"
                f"{int(peak_kib) / 1024:>8.0f}MB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--calls", type=int, default=100_000, help="marker loop length")
    parser.add_argument("--steps", default="20000,80000", help="export sizes, in steps")
    parser.add_argument("--skip-demo", action="store_true")
    args = parser.parse_args()
    if not args.skip_demo:
        bench_demo(args.runs, args.tokens)
        bench_loop(args.runs, args.calls)
    bench_convert([int(part) for part in args.steps.split(",")])


if __name__ == "__main__":
    main()

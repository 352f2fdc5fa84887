"""What a recording window costs: ``ncompass run --window`` against ``--profiler none``.

    python benchmarks/bench_windows.py [--runs N] [--calls 10000,100000,1000000] [--quick]

A small marked step (one tensor op) called ``--calls`` times in a loop, each size run by
``ncompass run`` in a fresh process, interleaved, median of ``--runs``:

- ``none``: ``--profiler none``, markers idle: the baseline;
- ``window``: ``--window step:FIRST:5`` with FIRST half-way (50,000 for 100,000 calls): five
  calls recorded, nothing before or after;
- ``nvtx-trace``: the same window under ``--profiler nvtx-trace`` (the run re-executed with
  ncompass' NVTX recorder attached, which keeps nothing outside the window);
- ``whole run`` (the smallest size only): ``--profiler torch`` recording every call, the way
  a run was recorded before windows.

For each it prints the wall time of the whole command, the child's peak RSS (``wait4``), the
window's trace size, and checks that the trace holds exactly the five chosen calls. Goals:
peak RSS at most 150 MB above ``none`` whatever the number of calls, wall time at most 1.25x.

Then, in a fresh process each, the per-call cost of an NVTX marker (``bind("nvtx", ...)``, as
``nvtx-trace`` markers are) with no NVTX tool attached, against the same marker with the
recorder attached but outside a window (its gate closed): best of 5 of 200,000 pairs each.

Then, in this process, the per-call cost of the window's marker outside a window (its sites
are wrapped to count calls) against the same ``torch`` marker unwrapped, and of a marker of
another name bound while the hook is set (it must cost what it cost): best of 5 of 200,000
enter/exit pairs each.
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

STEP_SCRIPT = """
import sys
import torch

def tag(n):
    return n

def step(n, x):
    tag(n)
    return x + 1

calls = int(sys.argv[1])
x = torch.zeros(1)
for n in range(1, calls + 1):
    x = step(n, x)
print(int(x.item()))
"""
STEP_SPEC = """version: 1
targets:
  - file: {script}
    functions:
      - qualname: step
        name: step
      - qualname: tag
        name: "tag.{{n}}"
"""
COUNT = 5
WINDOW_MODES = ("window", "nvtx-trace")
MEMORY_GOAL_MB = 150
WALL_GOAL = 1.25


def _run(folder: Path, calls: int, mode: str, index: int) -> tuple[float, float, Path | None]:
    """One ``ncompass run``: (wall seconds, peak RSS in MB, the trace written)."""
    name = f"{mode}-{calls}-{index}"
    command = [sys.executable, "-m", "ncompass", "run", "-c", str(folder / "spec.yaml")]
    command += ["-o", str(folder / "traces"), "--trace-name", name]
    if mode == "none":
        command += ["--profiler", "none"]
    elif mode == "window":
        command += ["--window", f"step:{calls // 2}:{COUNT}"]
    elif mode == "nvtx-trace":
        command += ["--profiler", "nvtx-trace", "--window", f"step:{calls // 2}:{COUNT}"]
    command += [str(folder / "step.py"), str(calls)]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    child = subprocess.Popen(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with {child.returncode}")
    trace = {
        "none": None,
        "window": folder / "traces" / f"{name}-w1.json",
        "nvtx-trace": folder / "traces" / f"{name}-w1.json",
        "whole": folder / "traces" / f"{name}.json",
    }[mode]
    return wall, usage.ru_maxrss / 1024, trace


def _check_window(trace: Path, calls: int) -> None:
    events = json.loads(trace.read_text())["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    first = calls // 2
    expected = [f"tag.{n}" for n in range(first, first + COUNT)]
    tags = [name for name in names if name.startswith("tag.")]
    if names.count("step") != COUNT or tags != expected:
        raise SystemExit(f"{trace}: expected calls {first}..{first + COUNT - 1}, got {tags}")


def _marker_costs() -> None:
    import timeit

    sys.path.insert(0, str(REPO))
    import torch  # noqa: F401  (the markers' idle path reads torch's profiler flag)

    from ncompass.capture.triggers import MarkerWindows
    from ncompass.runtime.sites import bind

    plain_enter, plain_exit = bind("torch", "bench.plain")
    windows = MarkerWindows("bench.counted", 1 << 40, 1)  # counts, never opens
    windows.install(_NoSink())
    try:
        counted_enter, counted_exit = bind("torch", "bench.counted")
        other_enter, other_exit = bind("torch", "bench.other")
    finally:
        windows.uninstall()
    calls = 200_000

    def per_call(enter: object, exit: object) -> float:
        loop = "for _ in range(n): exit(enter())"
        namespace = {"enter": enter, "exit": exit, "n": calls}
        return min(timeit.repeat(loop, globals=namespace, number=1, repeat=5)) / calls * 1e9

    plain = per_call(plain_enter, plain_exit)
    counted = per_call(counted_enter, counted_exit)
    other = per_call(other_enter, other_exit)
    print(f"idle torch marker: {plain:.0f} ns per call")
    print(f"the window's marker, counting: {counted:.0f} ns ({counted / plain:.2f}x)")
    print(f"another marker bound while the hook is set: {other:.0f} ns ({other / plain:.2f}x)")


NVTX_COST = """
import timeit
from ncompass.runtime.sites import bind
enter, exit = bind("nvtx", "bench.nvtx")
loop = "for _ in range(n): exit(enter())"
namespace = {"enter": enter, "exit": exit, "n": 200_000}
print(min(timeit.repeat(loop, globals=namespace, number=1, repeat=5)) / 200_000 * 1e9)
"""


def _nvtx_marker_costs() -> None:
    from ncompass.capture.nvtx_recorder import build_recorder, environment
    from ncompass.capture.nvtx_windows import WINDOWS_VARIABLE

    with tempfile.TemporaryDirectory(prefix="bench-nvtx-") as scratch:
        base = {**os.environ, "PYTHONPATH": str(REPO)}
        gated = {**base, **environment(scratch, library=build_recorder()), WINDOWS_VARIABLE: "1"}
        costs = [
            float(
                subprocess.run(
                    [sys.executable, "-c", NVTX_COST], env=env, capture_output=True, check=True
                ).stdout
            )
            for env in (base, gated)
        ]
    print(f"NVTX marker, no tool attached: {costs[0]:.0f} ns per call")
    print(
        f"NVTX marker, recorder attached, outside a window: {costs[1]:.0f} ns "
        f"({costs[1] / costs[0]:.2f}x)"
    )


class _NoSink:
    def prepare(self) -> None: ...
    def open(self, record: object) -> bool:
        return False

    def close(self) -> None: ...


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", default="10000,100000,1000000")
    parser.add_argument("--quick", action="store_true", help="one run, 10k and 100k calls")
    options = parser.parse_args()
    runs = 1 if options.quick else options.runs
    sizes = [10_000, 100_000] if options.quick else [int(c) for c in options.calls.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-windows-") as scratch:
        folder = Path(scratch)
        (folder / "step.py").write_text(STEP_SCRIPT)
        (folder / "spec.yaml").write_text(STEP_SPEC.format(script=folder / "step.py"))
        print(f"{'calls':>9}  {'mode':<11} {'wall s':>8} {'peak MB':>8} {'trace MB':>9}  ratios")
        failed = False
        for calls in sizes:
            modes = ["none", "window", "nvtx-trace"] + (["whole"] if calls == sizes[0] else [])
            results: dict[str, list[tuple[float, float, Path | None]]] = {m: [] for m in modes}
            for index in range(runs):
                for mode in modes:  # interleaved: load on the machine hits every mode alike
                    results[mode].append(_run(folder, calls, mode, index))
            base_wall = statistics.median(r[0] for r in results["none"])
            base_peak = statistics.median(r[1] for r in results["none"])
            for mode in modes:
                wall = statistics.median(r[0] for r in results[mode])
                peak = statistics.median(r[1] for r in results[mode])
                trace = results[mode][-1][2]
                size = trace.stat().st_size / 1e6 if trace is not None else 0.0
                if mode in WINDOW_MODES and trace is not None:
                    _check_window(trace, calls)
                ratio = ""
                if mode != "none":
                    ratio = f"wall {wall / base_wall:.2f}x, peak +{peak - base_peak:.0f} MB"
                if mode in WINDOW_MODES:
                    ok = wall / base_wall <= WALL_GOAL and peak - base_peak <= MEMORY_GOAL_MB
                    failed |= not ok
                    ratio += " (goal met)" if ok else " (GOAL MISSED)"
                print(f"{calls:>9}  {mode:<11} {wall:>8.2f} {peak:>8.0f} {size:>9.2f}  {ratio}")
        print(
            f"goals: window wall <= {WALL_GOAL}x none, peak <= none + {MEMORY_GOAL_MB} MB; "
            f"the window trace holds exactly calls N/2 .. N/2+{COUNT - 1}"
        )
        _marker_costs()
        _nvtx_marker_costs()
        if failed:
            raise SystemExit(1)


if __name__ == "__main__":
    main()

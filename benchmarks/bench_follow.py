"""What following a run's processes costs, side by side with ``--no-follow``.

    python benchmarks/bench_follow.py [--runs 7] [--children 8]

1. **A child's start-up.** A script starts ``--children`` ``spawn`` children one after
   another, each importing nothing heavy (a small module and the standard library), and
   measures, inside the script, each child from ``Process.start()`` to the end of its
   ``join()``: its wall time, and its CPU time (user + system, from
   ``getrusage(RUSAGE_CHILDREN)`` before and after: the child's own work, which waiting for a
   busy CPU barely changes). Run under ``ncompass run`` (the default torch profiler in the
   run's own process) with and without ``--no-follow``, the two interleaved run by run, so
   each run with following has a ``--no-follow`` partner started just before it. Goal: at most
   50 ms more per child.
2. **A run without children.** The same small script without children, under ``ncompass run
   --profiler none`` (so the profiler's start does not drown the difference), the whole
   command timed from outside (wall, and CPU of the command's process tree). Goal: the same
   as ``--no-follow``. Since that difference drowns in the noise of starting Python, the work
   following adds to such a run (preparing the children's folder, then finding no child) is
   also timed alone, in this process.

Prints medians, the difference of the interleaved pairs, ratios, the load average, and one
line ``goal: <= 50 ms per child: held/missed (...)``. The goal is judged on the child's extra
CPU time and on the median of the pairs' wall differences; both are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_MS = 50.0

LIGHT = """
import json

def step(i):
    return json.dumps({"i": i})
"""

SPEC = """
version: 1
targets:
  - module: unused_target
    functions:
      - qualname: step
        name: unused.step
"""

WITH_CHILDREN = """
import json, multiprocessing, resource, sys, time
import light

def child(i):
    light.step(i)

def cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime

if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    walls, cpus = [], []
    for i in range(int(sys.argv[1])):
        started, used = time.perf_counter(), cpu()
        process = context.Process(target=child, args=(i,))
        process.start()
        process.join()
        walls.append(time.perf_counter() - started)
        cpus.append(cpu() - used)
    print("CHILDREN", json.dumps({"wall": walls, "cpu": cpus}))
"""

WITHOUT_CHILDREN = """
import light
light.step(0)
"""

MODES = (("no-follow", ("--no-follow",)), ("follow", ()))


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(
    folder: Path, script: str, *options: str, args: tuple[str, ...] = ()
) -> tuple[float, float, str]:
    """Run ``ncompass run ... script``: its wall time, its process tree's CPU time, its stdout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])}
    command = [sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"]
    used = _cpu_of_children()
    started = time.perf_counter()
    result = subprocess.run(
        [*command, *options, script, *args], cwd=folder, env=env, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{script} {options} failed:\n{result.stderr}")
    return elapsed, _cpu_of_children() - used, result.stdout


def _child_times(stdout: str) -> dict[str, list[float]]:
    line = next(line for line in stdout.splitlines() if line.startswith("CHILDREN "))
    times: dict[str, list[float]] = json.loads(line.split(" ", 1)[1])
    return times


def _following_alone(folder: Path, repeats: int = 50) -> list[float]:
    """``FollowedRun.begin`` + ``scope`` + ``finish`` with no child: what a run pays for them."""
    sys.path.insert(0, str(REPO))
    from ncompass.capture.follow.tree import FollowedRun
    from ncompass.capture.run_options import RunOptions, load_specs

    config = load_specs([folder / "spec.yaml"], "torch")
    options = RunOptions(script="alone.py", profiler="torch")
    times = []
    for index in range(repeats):
        trace = folder / "out" / f"alone-{index}.json"
        trace.parent.mkdir(exist_ok=True)
        trace.write_text("{}")
        started = time.perf_counter()
        followed = FollowedRun.begin(config, options, trace)
        with followed.scope():
            pass
        followed.finish(trace, [], 0)
        times.append(time.perf_counter() - started)
    return times


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved pairs of runs")
    parser.add_argument("--children", type=int, default=8, help="spawn children per run")
    arguments = parser.parse_args()
    runs, children = arguments.runs, arguments.children
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-follow-") as scratch:
        folder = Path(scratch)
        (folder / "light.py").write_text(textwrap.dedent(LIGHT).lstrip())
        (folder / "spec.yaml").write_text(textwrap.dedent(SPEC).lstrip())
        (folder / "children.py").write_text(textwrap.dedent(WITH_CHILDREN).lstrip())
        (folder / "alone.py").write_text(textwrap.dedent(WITHOUT_CHILDREN).lstrip())
        wall: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
        cpu: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
        pairs_wall: list[float] = []  # per pair: follow's median child minus no-follow's
        pairs_cpu: list[float] = []
        alone_wall: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
        alone_cpu: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
        for index in range(runs):
            medians: dict[str, tuple[float, float]] = {}
            order = MODES if index % 2 == 0 else MODES[::-1]  # neither always goes first
            for mode, options in order:
                _, _, stdout = _run(folder, "children.py", *options, args=(str(children),))
                times = _child_times(stdout)
                wall[mode] += times["wall"]
                cpu[mode] += times["cpu"]
                medians[mode] = statistics.median(times["wall"]), statistics.median(times["cpu"])
                elapsed, used, _ = _run(folder, "alone.py", "--profiler", "none", *options)
                alone_wall[mode].append(elapsed)
                alone_cpu[mode].append(used)
            pairs_wall.append(medians["follow"][0] - medians["no-follow"][0])
            pairs_cpu.append(medians["follow"][1] - medians["no-follow"][1])
        own = _following_alone(folder)
    load_after = os.getloadavg()

    print(
        f"{children} spawn children x {runs} runs per mode, start() to join() per child, "
        f"medians (load average {load_before[0]:.1f} before, {load_after[0]:.1f} after):"
    )
    print("                    wall          CPU (user+sys)")
    for mode, _ in MODES:
        print(
            f"  {mode:<12} {_ms(statistics.median(wall[mode]))}  "
            f"{_ms(statistics.median(cpu[mode]))}"
        )
    base_wall, followed_wall = (statistics.median(wall[m]) for m in ("no-follow", "follow"))
    base_cpu, followed_cpu = (statistics.median(cpu[m]) for m in ("no-follow", "follow"))
    extra_cpu = followed_cpu - base_cpu
    pair_wall, pair_cpu = statistics.median(pairs_wall), statistics.median(pairs_cpu)
    print(
        f"  cost         {_ms(followed_wall - base_wall)}  {_ms(extra_cpu)}  per child "
        f"(ratios {followed_wall / base_wall:.2f}, {followed_cpu / base_cpu:.2f})"
    )
    print(
        f"  interleaved pairs, follow minus --no-follow (median of {runs}): wall {_ms(pair_wall)}"
        f", CPU {_ms(pair_cpu)}; wall of each pair: "
        + ", ".join(f"{d * 1000:+.0f}" for d in pairs_wall)
        + " ms"
    )
    print(f"a run without children, whole command, {runs} runs per mode (median):")
    print("                    wall          CPU (user+sys)")
    for mode, _ in MODES:
        print(
            f"  {mode:<12} {_ms(statistics.median(alone_wall[mode]))}  "
            f"{_ms(statistics.median(alone_cpu[mode]))}"
        )
    wall_ratio = statistics.median(alone_wall["follow"]) / statistics.median(
        alone_wall["no-follow"]
    )
    cpu_ratio = statistics.median(alone_cpu["follow"]) / statistics.median(alone_cpu["no-follow"])
    print(f"  ratios       {wall_ratio:8.2f}        {cpu_ratio:8.2f}")
    print(f"  following's own work in it: {statistics.median(own) * 1000:.1f} ms (median of 50)")
    cost_ms = max(extra_cpu, pair_wall) * 1000
    verdict = "held" if cost_ms <= GOAL_MS else "missed"
    print(
        f"goal: <= {GOAL_MS:.0f} ms per child: {verdict} ({cost_ms:.1f} ms; CPU "
        f"{extra_cpu * 1000:+.1f} ms, wall of interleaved pairs {pair_wall * 1000:+.1f} ms)"
    )


if __name__ == "__main__":
    main()

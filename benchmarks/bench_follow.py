"""What following a run's processes costs, side by side with ``--no-follow``.

    python benchmarks/bench_follow.py [--runs 7] [--children 8]

1. **A child's start-up.** A script starts ``--children`` ``spawn`` children one after
   another, each importing nothing heavy (a small module and the standard library), and
   measures, inside the script, each child from ``Process.start()`` to the end of its
   ``join()``: its wall time, and its CPU time (user + system, from
   ``getrusage(RUSAGE_CHILDREN)`` before and after: the child's own work, which waiting for a
   busy CPU changes far less than the wall time). One untimed child goes first (the first
   start also starts multiprocessing's resource tracker). Measured three ways:

   - whole runs: under ``ncompass run`` (the default torch profiler in the run's own process)
     with and without ``--no-follow``, interleaved run by run (alternating which goes first);
     per child, the medians of each mode, and the median over the pairs of runs of the
     difference of their medians;
   - adjacent children: in one followed run, ``2 x --children`` children in pairs, one of each
     pair started without ``NCOMPASS_FOLLOW`` (so not followed; the run's ``sitecustomize``
     still runs, and only hands over to the one it hides), the followed one first in every
     other pair. Two children a few hundred ms apart see the same load, so the median of the
     pairs' differences is the measure that holds on a busy machine;
   - goal: at most 50 ms more per child, judged on the adjacent pairs (the larger of the
     wall and CPU differences).
2. **A run without children.** The same small script without children, under ``ncompass run
   --profiler none`` (so the profiler's start does not drown the difference), the whole
   command timed from outside (wall, and CPU of the command's process tree). Goal: the same
   as ``--no-follow``. Since that difference drowns in the noise of starting Python, the work
   following adds to such a run (preparing the children's folder, then finding no child) is
   also timed alone, in this process.

Prints medians, ratios, the differences of the pairs, the load average, and one line
``goal: <= 50 ms per child: held/missed (...)``.
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
import json, multiprocessing, os, resource, sys, time
import light

def child(i):
    light.step(i)

def cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime

def start_and_join(context, i):
    process = context.Process(target=child, args=(i,))
    process.start()
    process.join()

if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    alternate = sys.argv[2:] == ["alternate"]
    variable = os.environ.get("NCOMPASS_FOLLOW")
    start_and_join(context, -1)  # untimed: the first start also starts the resource tracker
    walls, cpus, followed = [], [], []
    for i in range(int(sys.argv[1])):
        # alternate: in pairs, one child without the variable, the followed one first in
        # every other pair
        follows = variable is not None and (not alternate or i % 2 == (i // 2) % 2)
        if not follows:
            os.environ.pop("NCOMPASS_FOLLOW", None)
        started, used = time.perf_counter(), cpu()
        start_and_join(context, i)
        walls.append(time.perf_counter() - started)
        cpus.append(cpu() - used)
        followed.append(follows)
        if variable is not None:
            os.environ["NCOMPASS_FOLLOW"] = variable
    print("CHILDREN", json.dumps({"wall": walls, "cpu": cpus, "followed": followed}))
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


class Measured:
    """Everything the benchmark measured, in seconds."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
        self.cpu: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
        self.run_pairs_wall: list[float] = []  # follow's median child minus no-follow's
        self.run_pairs_cpu: list[float] = []
        self.child_pairs_wall: list[float] = []  # followed child minus the adjacent unfollowed
        self.child_pairs_cpu: list[float] = []
        self.alone_wall: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
        self.alone_cpu: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
        self.own: list[float] = []


def _measure(folder: Path, runs: int, children: int) -> Measured:
    measured = Measured()
    for index in range(runs):
        medians: dict[str, tuple[float, float]] = {}
        order = MODES if index % 2 == 0 else MODES[::-1]  # neither always goes first
        for mode, options in order:
            _, _, stdout = _run(folder, "children.py", *options, args=(str(children),))
            times = _child_times(stdout)
            measured.wall[mode] += times["wall"]
            measured.cpu[mode] += times["cpu"]
            medians[mode] = statistics.median(times["wall"]), statistics.median(times["cpu"])
        for mode, options in order:  # apart from the runs with children (their trace writes)
            elapsed, used, _ = _run(folder, "alone.py", "--profiler", "none", *options)
            measured.alone_wall[mode].append(elapsed)
            measured.alone_cpu[mode].append(used)
        measured.run_pairs_wall.append(medians["follow"][0] - medians["no-follow"][0])
        measured.run_pairs_cpu.append(medians["follow"][1] - medians["no-follow"][1])
        _, _, stdout = _run(folder, "children.py", args=(str(2 * children), "alternate"))
        times = _child_times(stdout)
        for first in range(0, len(times["wall"]) - 1, 2):
            sign = 1 if times["followed"][first] else -1
            measured.child_pairs_wall.append(
                sign * (times["wall"][first] - times["wall"][first + 1])
            )
            measured.child_pairs_cpu.append(sign * (times["cpu"][first] - times["cpu"][first + 1]))
    measured.own = _following_alone(folder)
    return measured


def _report(measured: Measured, runs: int, children: int, load: tuple[float, float]) -> None:
    median = statistics.median
    print(
        f"{children} spawn children x {runs} runs per mode, start() to join() per child, "
        f"medians (load average {load[0]:.1f} before, {load[1]:.1f} after):"
    )
    print("                      wall          CPU (user+sys)")
    for mode, _ in MODES:
        print(f"  {mode:<12} {_ms(median(measured.wall[mode]))}  {_ms(median(measured.cpu[mode]))}")
    base_wall, followed_wall = (median(measured.wall[m]) for m in ("no-follow", "follow"))
    base_cpu, followed_cpu = (median(measured.cpu[m]) for m in ("no-follow", "follow"))
    print(
        f"  cost         {_ms(followed_wall - base_wall)}  {_ms(followed_cpu - base_cpu)}  "
        f"per child (ratios {followed_wall / base_wall:.2f}, {followed_cpu / base_cpu:.2f})"
    )
    run_wall, run_cpu = median(measured.run_pairs_wall), median(measured.run_pairs_cpu)
    print(f"  whole runs in interleaved pairs, follow minus --no-follow (median of {runs} pairs):")
    print(
        f"               {_ms(run_wall)}  {_ms(run_cpu)}  per child; each pair's wall: "
        + ", ".join(f"{d * 1000:+.0f}" for d in measured.run_pairs_wall)
        + " ms"
    )
    child_wall, child_cpu = median(measured.child_pairs_wall), median(measured.child_pairs_cpu)
    pairs = len(measured.child_pairs_wall)
    print(f"  adjacent children, followed minus not, in followed runs (median of {pairs} pairs):")
    print(f"               {_ms(child_wall)}  {_ms(child_cpu)}  per child")

    print(f"a run without children, whole command, {runs} runs per mode (median):")
    print("                      wall          CPU (user+sys)")
    for mode, _ in MODES:
        print(
            f"  {mode:<12} {_ms(median(measured.alone_wall[mode]))}  "
            f"{_ms(median(measured.alone_cpu[mode]))}"
        )
    alone_wall = median(measured.alone_wall["follow"]) / median(measured.alone_wall["no-follow"])
    alone_cpu = median(measured.alone_cpu["follow"]) / median(measured.alone_cpu["no-follow"])
    print(f"  ratios       {alone_wall:8.2f}         {alone_cpu:8.2f}")
    print(f"  following's own work in it: {median(measured.own) * 1000:.1f} ms (median of 50)")

    cost_ms = max(child_wall, child_cpu) * 1000
    verdict = "held" if cost_ms <= GOAL_MS else "missed"
    print(
        f"goal: <= {GOAL_MS:.0f} ms per child: {verdict} ({cost_ms:.1f} ms; adjacent children "
        f"wall {child_wall * 1000:+.1f} ms, CPU {child_cpu * 1000:+.1f} ms; whole runs wall "
        f"{run_wall * 1000:+.1f} ms, CPU {run_cpu * 1000:+.1f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved pairs of runs")
    parser.add_argument("--children", type=int, default=8, help="spawn children per run")
    arguments = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-follow-") as scratch:
        folder = Path(scratch)
        (folder / "light.py").write_text(textwrap.dedent(LIGHT).lstrip())
        (folder / "spec.yaml").write_text(textwrap.dedent(SPEC).lstrip())
        (folder / "children.py").write_text(textwrap.dedent(WITH_CHILDREN).lstrip())
        (folder / "alone.py").write_text(textwrap.dedent(WITHOUT_CHILDREN).lstrip())
        measured = _measure(folder, arguments.runs, arguments.children)
    load = (load_before, os.getloadavg()[0])
    _report(measured, arguments.runs, arguments.children, load)


if __name__ == "__main__":
    main()

"""What following a run's processes costs, side by side with ``--no-follow``.

    python benchmarks/bench_follow.py [--runs 5]

1. **A child's start-up.** A script starts 8 ``spawn`` children one after another, each
   importing nothing heavy (a small module and the standard library), and times, inside the
   script, from each ``Process.start()`` to the end of its ``join()``. Run under
   ``ncompass run`` (the default torch profiler in the run's own process) with and without
   ``--no-follow``, interleaved run by run. Goal: at most 50 ms more per child.
2. **A run without children.** The same small script without children, under ``ncompass run
   --profiler none`` (so the profiler's start does not drown the difference), whole command
   timed from outside. Goal: the same as ``--no-follow``. Since that difference drowns in the
   noise of starting Python and torch, the work following adds to such a run (preparing the
   children's folder, then finding no child) is also timed alone, in this process.

Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHILDREN = 8

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

WITH_CHILDREN = f"""
import json, multiprocessing, sys, time
import light

def child(i):
    light.step(i)

if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    times = []
    for i in range({CHILDREN}):
        started = time.perf_counter()
        process = context.Process(target=child, args=(i,))
        process.start()
        process.join()
        times.append(time.perf_counter() - started)
    print("CHILDREN", json.dumps(times))
"""

WITHOUT_CHILDREN = """
import light
light.step(0)
"""


def _run(folder: Path, script: str, *options: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])}
    command = [sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"]
    started = time.perf_counter()
    result = subprocess.run(
        [*command, *options, script], cwd=folder, env=env, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{script} {options} failed:\n{result.stderr}")
    return elapsed, result.stdout


def _child_times(stdout: str) -> list[float]:
    line = next(line for line in stdout.splitlines() if line.startswith("CHILDREN "))
    times: list[float] = json.loads(line.split(" ", 1)[1])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="bench-follow-") as scratch:
        folder = Path(scratch)
        (folder / "light.py").write_text(textwrap.dedent(LIGHT).lstrip())
        (folder / "spec.yaml").write_text(textwrap.dedent(SPEC).lstrip())
        (folder / "children.py").write_text(textwrap.dedent(WITH_CHILDREN).lstrip())
        (folder / "alone.py").write_text(textwrap.dedent(WITHOUT_CHILDREN).lstrip())
        child: dict[str, list[float]] = {"no-follow": [], "follow": []}
        alone: dict[str, list[float]] = {"no-follow": [], "follow": []}
        for _ in range(runs):
            for mode, options in (("no-follow", ("--no-follow",)), ("follow", ())):
                _, stdout = _run(folder, "children.py", *options)
                child[mode] += _child_times(stdout)
                elapsed, _ = _run(folder, "alone.py", "--profiler", "none", *options)
                alone[mode].append(elapsed)
        own = _following_alone(folder)
    print(f"{CHILDREN} spawn children x {runs} runs, start() to join() per child (median):")
    base, followed = statistics.median(child["no-follow"]), statistics.median(child["follow"])
    print(f"  --no-follow  {base * 1000:8.1f} ms")
    print(f"  follow       {followed * 1000:8.1f} ms")
    cost = (followed - base) * 1000
    print(f"  cost         {cost:8.1f} ms per child  ratio {followed / base:.2f}")
    print(f"a run without children, whole command, {runs} runs (median):")
    base, followed = statistics.median(alone["no-follow"]), statistics.median(alone["follow"])
    print(f"  --no-follow  {base * 1000:8.1f} ms")
    print(f"  follow       {followed * 1000:8.1f} ms  ratio {followed / base:.2f}")
    print(f"  following's own work in it: {statistics.median(own) * 1000:.1f} ms (median of 50)")


if __name__ == "__main__":
    main()

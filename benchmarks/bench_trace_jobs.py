"""Eight rank traces through ``ncompass breakdown`` and ``summarize``: ``--jobs 2`` against 1.

    python benchmarks/bench_trace_jobs.py [--size-mb 50] [--ranks 8] [--runs 3]
        [--commands breakdown,summarize]

The ranks are built under ``benchmarks/.data`` by ``benchmarks/traces/make_trace.py`` (gzip
level 1) from HTA's ``ns_resolution_trace``, each with its own ``distributedInfo.rank``. Each
run is the real command line in a fresh process, wall time from start to exit (worker start-up
included); medians over ``--runs``, the two ways interleaved. The JSON printed must be the
same.

The machine may be shared: before each pair of runs, a fixed pure-Python loop is timed alone
and as two processes at once. Their ratio is the best ``--jobs 2`` can do at that moment (0.5
on two idle cores), printed beside the result so a miss can be told apart from a busy machine.
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson
from repeated_trace import DATA, HERE, first_source_trace, repeated_trace

COMMANDS = ("breakdown", "summarize")
GOAL = 0.6  # --jobs 2 wall time over --jobs 1's, at most


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=float, default=50.0, help="JSON size of each rank")
    parser.add_argument("--ranks", type=int, default=8, help="how many rank traces")
    parser.add_argument("--runs", type=int, default=3, help="runs per way (median)")
    parser.add_argument(
        "--commands",
        default=",".join(COMMANDS),
        help="comma-separated commands to time (%(default)s)",
    )
    options = parser.parse_args()
    commands = [name for name in options.commands.split(",") if name]
    traces = [build_rank(rank, options.size_mb) for rank in range(options.ranks)]
    total = sum(trace.stat().st_size for trace in traces) / 1e6
    print(
        f"{options.ranks} ranks of {options.size_mb:g} MB JSON ({total:.0f} MB gzip in all), "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} before"
    )
    times: dict[tuple[str, int], list[float]] = {
        (command, jobs): [] for command in commands for jobs in (1, 2)
    }
    cpu_times: dict[tuple[str, int], list[float]] = {key: [] for key in times}
    outputs: dict[tuple[str, int], bytes] = {}
    floors: list[float] = []
    loads: list[float] = []
    for run in range(1, options.runs + 1):
        floors.append(two_process_floor())
        loads.append(os.getloadavg()[0])
        for command, jobs in times:
            seconds, cpu, outputs[command, jobs] = run_command(command, traces, jobs)
            times[command, jobs].append(seconds)
            cpu_times[command, jobs].append(cpu)
        pairs = ", ".join(
            f"{command} {times[command, 1][-1]:.2f} s / {times[command, 2][-1]:.2f} s = "
            f"{times[command, 2][-1] / times[command, 1][-1]:.2f}x"
            for command in commands
        )
        print(
            f"run {run}: load {loads[-1]:.2f}, two busy loops {floors[-1]:.2f}x, "
            f"--jobs 1 / --jobs 2: {pairs}",
            flush=True,
        )
    for command in commands:
        if outputs[command, 1] != outputs[command, 2]:
            raise SystemExit(f"{command} --jobs 2 printed other JSON than --jobs 1")
    medians = {key: statistics.median(runs) for key, runs in times.items()}
    print(f"{'command':<10} {'way':<9} {'median s':>9} {'CPU s':>7}  runs")
    for (command, jobs), median in medians.items():
        runs = " ".join(f"{seconds:.2f}" for seconds in times[command, jobs])
        cpu = statistics.median(cpu_times[command, jobs])
        print(f"{command:<10} --jobs {jobs:<2} {median:>9.2f} {cpu:>7.2f}  {runs}")
    for command in commands:
        ratio = medians[command, 2] / medians[command, 1]
        verdict = "met" if ratio <= GOAL else "MISSED"
        print(f"{command}: --jobs 2 takes {ratio:.2f}x the time of --jobs 1 ", end="")
        print(f"(goal <= {GOAL}x: {verdict})")
    floor = statistics.median(floors)
    shown = " ".join(f"{value:.2f}" for value in floors)
    print(f"two busy loops at once took {floor:.2f}x one alone (the best possible; runs {shown})")
    print(
        "load average before each run "
        + " ".join(f"{value:.2f}" for value in loads)
        + f", {os.getloadavg()[0]:.2f} after; same JSON both ways"
    )


_LOOP = "n = 0\nfor i in range(20_000_000): n += i"


def two_process_floor() -> float:
    """Wall time of two CPU-bound processes at once over one alone: 0.5 on two free cores."""

    def wall(processes: int) -> float:
        started = time.perf_counter()
        running = [subprocess.Popen([sys.executable, "-c", _LOOP]) for _ in range(processes)]
        for process in running:
            process.wait()
        return time.perf_counter() - started

    return wall(2) / 2 / wall(1)


def build_rank(rank: int, size_mb: float) -> Path:
    """The trace of one rank: the source, told it is ``rank``, repeated to ``size_mb``."""
    path = DATA / f"jobs_{size_mb:g}mb_rank{rank}.json.gz"
    if path.exists():
        return path
    document = orjson.loads(gzip.decompress(first_source_trace().read_bytes()))
    document["distributedInfo"] = {**document.get("distributedInfo", {}), "rank": rank}
    seed = DATA / f"jobs_seed_rank{rank}.json.gz"
    DATA.mkdir(parents=True, exist_ok=True)
    seed.write_bytes(gzip.compress(orjson.dumps(document), compresslevel=1))
    try:
        return repeated_trace(seed, path, size_mb)
    finally:
        seed.unlink()


def run_command(command: str, traces: list[Path], jobs: int) -> tuple[float, float, bytes]:
    """``ncompass COMMAND --json --jobs N`` on the traces: wall time, CPU time, what it printed.

    The CPU time (user and system, its workers included) depends much less on the load:
    what ``--jobs 2`` costs beyond ``--jobs 1`` is the price of the workers themselves.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", command, "--json", "--jobs", str(jobs), *traces],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, done.stdout


if __name__ == "__main__":
    main()

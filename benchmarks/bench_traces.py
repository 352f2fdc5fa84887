"""ncompass's trace breakdown against Holistic Trace Analysis (HTA), side by side, in one run.

    python benchmarks/bench_traces.py [--runs 3] [--size-mb 54] [--huge] [--decoders]

The anchor of issue 3 is a 54 MB (uncompressed) single-rank Kineto trace. None of the shared
real traces is that big, so one is built reproducibly under ``benchmarks/.data`` by repeating
the shared ns-resolution V100 trace end to end with fresh ids (``benchmarks/traces/make_trace.py``).

HTA runs in its own virtual environment (``benchmarks/.venv-hta``, created on first use with
``pip install HolisticTraceAnalysis``). Each tool runs in a fresh child process, interleaved run
by run; a child reports its own peak RSS since exec (``VmHWM``; ``ru_maxrss`` would include the
parent it was forked from) and its children's (HTA may parse in a worker pool).
"time" is measured inside the child from before importing the tool to the breakdown in hand;
"wall" adds interpreter start-up. Medians over ``--runs``.

Numbers are compared where both compute the same thing: HTA drops the GPU work launched in the
last ProfilerStep, so ncompass runs with ``exclude_last_profiler_step=True``; HTA's rounding of
ns-resolution timestamps to whole microseconds is turned off (``HTA_DISABLE_NS_ROUNDING=1``),
which also makes HTA faster. ``--huge`` adds 250 MB, 500 MB and 1 GB traces, gzip and plain
(ncompass only, ``--runs`` each, interleaved; goals: <= 4 CPU s per GB of JSON on one core,
peak <= 300 MB at 1 GB), each plain one also read in two parts on two cores (``--jobs 2``).
"ncompass" reads events from the JSON text and folds them in C (``ncompass/traces/_fold.c``),
"ncompass-python" is ncompass with the extension hidden (the Python fold of msgspec structs),
"ncompass-dicts" with ``msgspec`` hidden too (one dict per event), and ``--decoders`` times
the candidate JSON decoders on the anchor's event array in this process.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / ".data"
HTA_VENV = HERE / ".venv-hta"
SOURCE = REPO / "tests" / "data" / "traces" / "hta" / "ns_resolution_trace"
COMPARED = ("kernel_span_us", "idle_us", "compute_us", "non_compute_us")
GOAL_SPEEDUP = 10.0
GOAL_MEMORY_RATIO = 1 / 3
GOAL_ACCURACY = 0.005
GOAL_HUGE_PEAK_MB = 300
GOAL_SECONDS_PER_GB = 4.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per tool (median reported)")
    parser.add_argument("--size-mb", type=float, default=54.0, help="anchor trace size (JSON)")
    parser.add_argument("--huge", action="store_true", help="also process a 1 GB trace")
    parser.add_argument(
        "--decoders", action="store_true", help="time the candidate decoders on the anchor"
    )
    parser.add_argument("--no-scaling", action="store_true", help="skip the linearity check")
    parser.add_argument(
        "--no-shared", action="store_true", help="skip the comparison on the shared traces"
    )
    arguments = parser.parse_args()

    hta_python = ensure_hta()
    anchor = trace_of_size(arguments.size_mb)
    print(f"anchor trace: {anchor.name}, {anchor.stat().st_size / 1e6:.1f} MB gzipped\n")

    if arguments.decoders:
        report_decoders(anchor, arguments.runs)
    results: dict[str, list[dict[str, Any]]] = {
        "HTA": [],
        "ncompass": [],
        "ncompass-python": [],
        "ncompass-dicts": [],
    }
    for _ in range(arguments.runs):
        results["HTA"].append(run_child(hta_command(hta_python, anchor), hta_environment()))
        results["ncompass"].append(run_child(ncompass_command(anchor), dict(os.environ)))
        results["ncompass-python"].append(
            run_child(ncompass_command(anchor, "without-native"), dict(os.environ))
        )
        results["ncompass-dicts"].append(
            run_child(ncompass_command(anchor, "without-msgspec"), dict(os.environ))
        )
    report_side_by_side(results)
    report_accuracy(results["HTA"][0], results["ncompass"][0])
    if not arguments.no_shared:
        report_shared_traces(hta_python)
    if not arguments.no_scaling:
        report_scaling(arguments.size_mb, arguments.runs)
    if arguments.huge:
        report_huge(arguments.runs)


def ensure_hta() -> Path:
    python = HTA_VENV / "bin" / "python"
    if not python.exists():
        print("creating benchmarks/.venv-hta with HolisticTraceAnalysis (first run only)...")
        subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "HolisticTraceAnalysis"], check=True
        )
    return python


def trace_of_size(size_mb: float, level: int = 6) -> Path:
    path = DATA / f"anchor-{size_mb:g}MB.json.gz"
    if not path.exists():
        sources = sorted(SOURCE.glob("*.json.gz"))
        if not sources:
            sys.exit(f"the real trace folder {SOURCE} is missing")
        DATA.mkdir(parents=True, exist_ok=True)
        print(f"building {path.name} from {sources[0].name} (first run only)...")
        partial = path.with_suffix(".partial")
        # In a child process, so this one stays small for the children it forks.
        subprocess.run(
            [
                sys.executable,
                str(HERE / "traces" / "make_trace.py"),
                str(sources[0]),
                str(partial),
                "--size-mb",
                str(size_mb),
                "--level",
                str(level),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        partial.replace(path)
    return path


def hta_command(python: Path, trace: Path) -> list[str]:
    return [str(python), str(HERE / "traces" / "run_hta.py"), str(trace)]


def hta_environment() -> dict[str, str]:
    return {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"}


def ncompass_command(trace: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        str(HERE / "traces" / "run_ncompass.py"),
        str(trace),
        "exclude-last-step",
        *options,
    ]


def run_child(command: list[str], environment: dict[str, str]) -> dict[str, Any]:
    """Run one measurement in a fresh process; add its wall time and peak RSS (MB)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment, text=True
    )
    output, errors = child.communicate()
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise ChildFailed(command, child.returncode, errors)
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    peak_kb = max(result["self_peak_kb"], result["children_peak_kb"])
    result.update(wall_seconds=wall, peak_mb=peak_kb / 1024)
    return result


class ChildFailed(Exception):
    """A measured child process exited with an error."""

    def __init__(self, command: list[str], code: int, errors: str) -> None:
        lines = errors.strip().splitlines()
        self.last_line = lines[-1] if lines else f"exit code {code}"
        super().__init__(f"{' '.join(command)} failed with exit code {code}: {self.last_line}")


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def report_side_by_side(results: dict[str, list[dict[str, Any]]]) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} (2 cores)")
    print(f"{'tool':<16} {'time (s)':>9} {'wall (s)':>9} {'CPU (s)':>8} {'peak RSS (MB)':>14}")
    for tool, runs in results.items():
        cpu = f"{median(runs, 'cpu_seconds'):>8.2f}" if "cpu_seconds" in runs[0] else f"{'':>8}"
        print(
            f"{tool:<16} {median(runs, 'seconds'):>9.2f} {median(runs, 'wall_seconds'):>9.2f} "
            f"{cpu} {median(runs, 'peak_mb'):>14.0f}"
        )
    hta, ours = results["HTA"], results["ncompass"]
    python, dicts = results["ncompass-python"], results["ncompass-dicts"]
    print(
        f"\nthe C fold against the Python fold of structs: "
        f"{median(python, 'cpu_seconds') / median(ours, 'cpu_seconds'):.2f}x less CPU; against "
        f"one dict per event: {median(dicts, 'cpu_seconds') / median(ours, 'cpu_seconds'):.2f}x"
    )
    speedup = median(hta, "seconds") / median(ours, "seconds")
    wall_speedup = median(hta, "wall_seconds") / median(ours, "wall_seconds")
    memory = median(ours, "peak_mb") / median(hta, "peak_mb")
    print(
        f"\nncompass is {speedup:.1f}x faster ({wall_speedup:.1f}x in wall time) "
        f"[goal >= {GOAL_SPEEDUP:g}x: {verdict(speedup >= GOAL_SPEEDUP)}]"
    )
    print(
        f"ncompass peak memory is {memory:.2f} of HTA's "
        f"[goal <= {GOAL_MEMORY_RATIO:.2f}: {verdict(memory <= GOAL_MEMORY_RATIO)}]\n"
    )


def report_accuracy(hta: dict[str, Any], ours: dict[str, Any]) -> None:
    print(f"{'quantity':<16} {'HTA (us)':>16} {'ncompass (us)':>16} {'difference':>11}")
    worst = 0.0
    for key in COMPARED:
        difference = abs(ours[key] - hta[key]) / hta[key] if hta[key] else abs(ours[key])
        worst = max(worst, difference)
        print(f"{key:<16} {hta[key]:>16.3f} {ours[key]:>16.3f} {difference:>10.4%}")
    print(
        f"largest difference {worst:.4%} [goal <= {GOAL_ACCURACY:.1%}: "
        f"{verdict(worst <= GOAL_ACCURACY)}]\n"
    )


def report_shared_traces(hta_python: Path) -> None:
    """The same comparison on every shared real trace (each is small: one run each)."""
    print("the shared real traces, HTA against ncompass (largest difference of the four):")
    for trace in sorted(SOURCE.parent.rglob("*.json.gz")):
        ours = run_child(ncompass_command(trace), dict(os.environ))
        try:
            theirs = run_child(hta_command(hta_python, trace), hta_environment())
        except ChildFailed as failure:
            print(
                f"  {trace.name[:30]:<30} HTA fails ({failure.last_line}); ncompass: "
                f"{ours['gpu_events']} GPU events"
            )
            continue
        worst = max(
            abs(ours[key] - theirs[key]) / theirs[key] if theirs[key] else abs(ours[key])
            for key in COMPARED
        )
        seconds = f"{theirs['seconds']:.2f} s vs {ours['seconds']:.2f} s"
        print(
            f"  {trace.name[:30]:<30} {worst:>9.4%}  ({ours['gpu_events']} GPU events; {seconds})"
        )
    print()


def report_scaling(size_mb: float, runs: int) -> None:
    print("ncompass time and peak memory against trace size (linear growth expected):")
    print(f"{'JSON (MB)':>10} {'time (s)':>9} {'MB/s':>7} {'peak RSS (MB)':>14}")
    for factor in (0.5, 1, 2, 4):
        trace = trace_of_size(size_mb * factor)
        measured = [run_child(ncompass_command(trace), dict(os.environ)) for _ in range(runs)]
        seconds = median(measured, "seconds")
        print(
            f"{size_mb * factor:>10.0f} {seconds:>9.2f} {size_mb * factor / seconds:>7.0f} "
            f"{median(measured, 'peak_mb'):>14.0f}"
        )
    print()


def report_huge(runs: int) -> None:
    """250 MB, 500 MB and 1 GB of JSON, gzip and plain: CPU seconds per GB, peak memory, and the
    plain ones read in two parts at once; the three ways interleaved, medians of ``runs``."""
    print(
        f"large traces (medians of {runs}, interleaved; "
        f"load average {os.getloadavg()[0]:.1f} on 2 cores):"
    )
    print(
        f"{'JSON':>6} {'file':>5} {'jobs':>4} {'wall (s)':>9} {'CPU (s)':>8} {'CPU s/GB':>9} "
        f"{'peak (MB)':>10}  CPU s/GB of each run"
    )
    for size_mb in (250, 500, 1000):
        compressed = trace_of_size(size_mb, level=1)
        plain = DATA / f"anchor-{size_mb:g}MB.json"
        if not plain.exists():
            subprocess.run(f"gzip -dc {compressed} > {plain}.partial", shell=True, check=True)
            Path(f"{plain}.partial").replace(plain)
        ways = ((compressed, 1), (plain, 1), (plain, 2))
        results: dict[tuple[Path, int], list[dict[str, Any]]] = {way: [] for way in ways}
        for _ in range(runs):
            for trace, jobs in ways:
                command = ncompass_command(trace, f"jobs={jobs}")
                results[trace, jobs].append(run_child(command, dict(os.environ)))
        for (trace, jobs), measured in results.items():
            per_gb = median(measured, "cpu_seconds") / (size_mb / 1000)
            peak = median(measured, "peak_mb")
            each = " ".join(f"{run['cpu_seconds'] / (size_mb / 1000):.2f}" for run in measured)
            met = per_gb <= GOAL_SECONDS_PER_GB if jobs == 1 else True
            print(
                f"{size_mb:>4}MB {'gzip' if trace == compressed else 'JSON':>5} {jobs:>4} "
                f"{median(measured, 'wall_seconds'):>9.2f} {median(measured, 'cpu_seconds'):>8.2f} "
                f"{per_gb:>9.2f} {peak:>10.0f}  {each}"
                + ("" if met else f"  [goal <= {GOAL_SECONDS_PER_GB:g} CPU s/GB: MISSED]")
                + (
                    f"  [peak goal <= {GOAL_HUGE_PEAK_MB} MB: {verdict(peak <= GOAL_HUGE_PEAK_MB)}]"
                    if size_mb == 1000
                    else ""
                )
            )
    print()


def report_decoders(trace: Path, runs: int) -> None:
    """Decode the anchor's whole event array with each candidate (CPU time, medians)."""
    import gzip

    import msgspec
    import orjson

    text = gzip.decompress(trace.read_bytes())
    events = text[text.index(b"[", text.index(b'"traceEvents"')) : text.rindex(b"]") + 1]
    from ncompass.traces._decode import decode_link_events, decode_link_structs

    candidates = {
        "json (stdlib), dicts": json.loads,
        "orjson, dicts": orjson.loads,
        "msgspec, untyped dicts": msgspec.json.Decoder().decode,
        "msgspec, LinkEvent structs": decode_link_structs,
        "ncompass C, event records": decode_link_events,
    }
    print(f"decoding the anchor's {len(events) / 1e6:.0f} MB event array (CPU s, median):")
    for label, decode in candidates.items():
        seconds = []
        for _ in range(runs):
            started = time.process_time()
            decode(events)  # type: ignore[misc]
            seconds.append(time.process_time() - started)
        print(f"  {label:<28} {statistics.median(seconds):>6.3f}")
    print()


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    main()

"""The regression gate of the headline benchmarks (``make bench-check``, run by ``make test``).

    python benchmarks/bench_check.py [--output FILE] [--baseline FILE] [--update] [names...]

Each benchmark measures its figures side by side with a peer in the same run (medians of
interleaved repeats) and writes them as JSON (``--output``, by default
``benchmarks/.data/bench-check.json``); the check compares every figure with the committed
baseline (``benchmarks/baseline.json``) and fails (exit 1) when one is worse than the baseline
by more than its noise band. Every figure is a ratio against its peer, never an absolute time,
so a busy machine slows both sides alike. A figure out of its band is measured once more and
the better of the two medians kept: a moment of load fails one measurement, a real slowdown
fails both.

The fast benchmarks (under 2 minutes together on the shared 2-core machine):

- ``import`` (``bench_import.py --json``), each in CPU time: cached rewritten import / plain
  cached import (realistic and stress specs), first rewrite / plain compile, first cached
  import of a process / a plain one's (fixed costs), non-target imports hooked / plain;
- ``markers`` (``bench_markers.py``'s cases): an idle ``torch`` and ``nvtx`` marker / a bare
  NVTX push/pop pair;
- ``trace``: ``breakdown`` of a 50 MB trace / decoding the same file with ``orjson``, CPU time
  in fresh processes.

``--update`` writes the figures measured now as the new baseline: do it only on purpose (a
change that moves a figure for a reason), in a commit that says why.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "baseline.json"
OUTPUT = HERE / ".data" / "bench-check.json"
TRACE_MB = 50.0


@dataclass(frozen=True)
class Figure:
    """One gated figure: lower is better; ``band`` is the noise it may move by (0.3: +30 %)."""

    name: str
    band: float


# The bands are what each ratio moved by on an unchanged tree beside two busy loops on the
# 2-core machine (docs/performance.md, "The benchmark gate"), with room to spare.
FIGURES: dict[str, list[Figure]] = {
    "import": [
        Figure("cached_rewrite_ratio", 0.35),
        Figure("cached_stress_ratio", 0.45),
        Figure("first_rewrite_per_compile", 0.6),
        Figure("first_cached_fixed_ratio", 0.8),
        Figure("non_target_import_ratio", 0.25),
    ],
    # loops of 50-100 ns in wall-clock time: the noisiest figures here
    "markers": [
        Figure("torch_marker_per_nvtx_pair", 1.0),
        Figure("nvtx_marker_per_nvtx_pair", 1.0),
    ],
    "trace": [Figure("breakdown_per_decode", 0.75)],
}


def measure_import() -> dict[str, float]:
    """bench_import.py's figures, from its JSON."""
    command = [sys.executable, str(HERE / "bench_import.py"), "--repeats", "7", "--json"]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    results: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    fixed = results["first_cached"]
    return {
        "cached_rewrite_ratio": results["cached_rewrite_cpu_ratio"],
        "cached_stress_ratio": results["cached_stress_cpu_ratio"],
        "first_rewrite_per_compile": results["first_rewrite_cpu_per_compile"],
        # the peer's own fixed cost (a plain first import) keeps the ratio away from zero
        "first_cached_fixed_ratio": fixed["rewritten_fixed_ms"] / fixed["plain_fixed_ms"],
        "non_target_import_ratio": results["non_target_import_cpu_ratio"],
    }


def measure_markers() -> dict[str, float]:
    """Idle markers against the bare NVTX pair, with bench_markers.py's own cases."""
    sys.path.insert(0, str(HERE))
    import bench_markers

    every = bench_markers.cases(include_torch=True)
    names = ["bare loop", "bare nvtx domain push/pop pair", "marker torch", "marker nvtx"]
    ns = bench_markers.measure({name: every[name] for name in names}, repeats=7)
    pair = ns["bare nvtx domain push/pop pair"]
    return {
        "torch_marker_per_nvtx_pair": ns["marker torch"] / pair,
        "nvtx_marker_per_nvtx_pair": ns["marker nvtx"] / pair,
    }


_DECODE = """
import gzip, json, sys, time
import orjson
start = time.process_time()
with gzip.open(sys.argv[1], "rb") as handle:
    orjson.loads(handle.read())
print(json.dumps({"cpu_seconds": time.process_time() - start}))
"""


def measure_trace() -> dict[str, float]:
    """``breakdown`` of a 50 MB trace against decoding it, interleaved fresh processes."""
    sys.path.insert(0, str(HERE))
    from repeated_trace import DATA, first_source_trace, repeated_trace

    trace = repeated_trace(first_source_trace(), DATA / f"check-{TRACE_MB:g}mb.json.gz", TRACE_MB)
    breakdown_command = [
        sys.executable,
        str(HERE / "traces" / "run_ncompass.py"),
        str(trace),
        "exclude-last-step",
    ]
    decode_command = [sys.executable, "-c", _DECODE, str(trace)]
    breakdowns, decodes = [], []
    for _ in range(3):
        breakdowns.append(_child_cpu(breakdown_command))
        decodes.append(_child_cpu(decode_command))
    return {"breakdown_per_decode": statistics.median(breakdowns) / statistics.median(decodes)}


def _child_cpu(command: list[str]) -> float:
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return float(json.loads(output.strip().splitlines()[-1])["cpu_seconds"])


MEASURES: dict[str, Callable[[], dict[str, float]]] = {
    "import": measure_import,
    "markers": measure_markers,
    "trace": measure_trace,
}


@dataclass(frozen=True)
class Verdict:
    """A figure against its baseline."""

    name: str
    value: float
    baseline: float | None
    band: float

    @property
    def limit(self) -> float | None:
        """The highest value that passes."""
        return None if self.baseline is None else self.baseline * (1 + self.band)

    @property
    def regressed(self) -> bool:
        """Worse than the baseline beyond the noise band."""
        limit = self.limit
        return limit is not None and self.value > limit


def compare(
    figures: dict[str, float], baseline: dict[str, float], bands: dict[str, float]
) -> list[Verdict]:
    """Every measured figure against its baseline (None for a figure the baseline lacks)."""
    return [
        Verdict(name, value, baseline.get(name), bands[name]) for name, value in figures.items()
    ]


def bands_of(benchmark: str) -> dict[str, float]:
    """``{figure: band}`` of one benchmark."""
    return {f"{benchmark}.{figure.name}": figure.band for figure in FIGURES[benchmark]}


def run_benchmark(benchmark: str) -> dict[str, float]:
    """One benchmark's figures, named ``benchmark.figure``."""
    return {f"{benchmark}.{name}": value for name, value in MEASURES[benchmark]().items()}


def read_baseline(path: Path) -> dict[str, float]:
    """The committed figures; exits 2 with one line if the file is unreadable."""
    try:
        document = json.loads(path.read_text())
        return {str(name): float(value) for name, value in document["figures"].items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        print(
            f"bench-check: cannot read the baseline {path}: {error}; restore it from git "
            "(git checkout -- benchmarks/baseline.json) or write a new one with --update",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


def report(verdicts: list[Verdict]) -> None:
    """One line per figure."""
    for verdict in verdicts:
        if verdict.baseline is None:
            print(f"  {verdict.name:42s} {verdict.value:8.3f}  (no baseline)")
            continue
        state = "REGRESSED" if verdict.regressed else "ok"
        print(
            f"  {verdict.name:42s} {verdict.value:8.3f}  baseline {verdict.baseline:8.3f}, "
            f"limit {verdict.limit:8.3f} (+{verdict.band:.0%})  {state}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"only these ({', '.join(MEASURES)})")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the figures, as JSON")
    parser.add_argument("--update", action="store_true", help="write them as the baseline")
    args = parser.parse_args()
    unknown = [name for name in args.names if name not in MEASURES]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(MEASURES)}")
    baseline = read_baseline(args.baseline)
    figures: dict[str, float] = {}
    failed: list[Verdict] = []
    for benchmark in args.names or list(MEASURES):
        started = time.perf_counter()
        bands = bands_of(benchmark)
        measured = run_benchmark(benchmark)
        verdicts = compare(measured, baseline, bands)
        if not args.update and any(verdict.regressed for verdict in verdicts):
            again = run_benchmark(benchmark)  # a moment of load, or a real regression?
            measured = {name: min(value, again[name]) for name, value in measured.items()}
            verdicts = compare(measured, baseline, bands)
        print(f"{benchmark} ({time.perf_counter() - started:.0f} s):", flush=True)
        report(verdicts)
        figures.update(measured)
        failed.extend(verdict for verdict in verdicts if verdict.regressed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"figures": figures}, indent=2) + "\n")
    if args.update:
        written = {name: round(value, 4) for name, value in {**baseline, **figures}.items()}
        args.baseline.write_text(json.dumps({"figures": written}, indent=2) + "\n")
        print(f"baseline written: {args.baseline}")
        return 0
    if failed:
        names = ", ".join(verdict.name for verdict in failed)
        print(f"bench-check: regressed beyond the noise band: {names}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

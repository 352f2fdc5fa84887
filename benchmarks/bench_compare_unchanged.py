"""How often ``ncompass compare`` calls an unchanged program's entries slower or faster.

Give it recordings of one program (``ncompass run`` of the same script, N times); every way of
choosing RUNS traces for the before side and RUNS others for the after side is compared (a
seeded sample of ``--pairs`` of them when there are more; with ``--interleaved``, every window
of 2 x RUNS consecutive recordings split alternately, as the CI recipe records), and the
comparisons with at least one ``slower`` or ``faster`` entry are counted (every one of them is a
false alarm: nothing changed). Each trace is read once.

    python benchmarks/bench_compare_unchanged.py [--runs 3] [--pairs 300] TRACE.json ...
"""

from __future__ import annotations

import argparse
import itertools
import random
from collections import Counter
from pathlib import Path

from ncompass.analysis.comparison.matching import compare_samples
from ncompass.analysis.comparison.result import Change
from ncompass.analysis.comparison.samples import SideSamples
from ncompass.traces.link import LinkedTrace, link_trace

FEW = 5


def _samples(change: Change) -> tuple[int, int]:
    assert change.before is not None and change.after is not None
    return change.before.samples, change.after.samples


def _side(traces: list[LinkedTrace]) -> SideSamples:
    side = SideSamples()
    for trace in traces:
        side.add(trace)
    return side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="traces a side")
    parser.add_argument("--pairs", type=int, default=300, help="at most this many comparisons")
    parser.add_argument(
        "--interleaved",
        action="store_true",
        help="the traces are in recording order; compare alternate ones, as recorded b a b a",
    )
    parser.add_argument("traces", nargs="+", type=Path)
    args = parser.parse_args()
    linked = [link_trace(path, progress=False) for path in args.traces]
    indices = list(range(len(linked)))
    if args.interleaved:  # as recorded b a b a ...: every window of 2 * RUNS, both ways
        windows = [indices[start : start + 2 * args.runs] for start in range(len(linked))]
        pairs = [
            pair
            for window in windows
            if len(window) == 2 * args.runs
            for pair in ((window[0::2], window[1::2]), (window[1::2], window[0::2]))
        ]
    else:
        pairs = [
            (before, after)
            for before in itertools.combinations(indices, args.runs)
            for after in itertools.combinations(
                [index for index in indices if index not in before], args.runs
            )
        ]
    if len(pairs) > args.pairs:
        pairs = random.Random(0).sample(pairs, args.pairs)
    comparisons = len(pairs)
    alarms = few = 0
    names: Counter[str] = Counter()
    for before, after in pairs:
        result = compare_samples(
            _side([linked[i] for i in before]), _side([linked[i] for i in after])
        )
        real = [c for c in (*result.overall, *result.markers, *result.cpu_ops) if c.is_real]
        alarms += bool(real)
        few += bool([c for c in real if c.kind == "run" or min(_samples(c)) >= FEW])
        names.update(f"{c.name} {c.verdict}" for c in real)
    print(f"{len(linked)} recordings, {args.runs} a side: {comparisons} comparisons")
    print(f"with a slower/faster entry: {alarms} ({alarms / comparisons:.1%})")
    print(f"  of which with {FEW}+ samples a side (or the run time): {few}")
    for name, count in names.most_common(10):
        print(f"  {count:5d}  {name}")


if __name__ == "__main__":
    main()

"""What measuring setup spans (imports, model construction) costs, side by side with not measuring.

    python benchmarks/bench_setup_spans.py [--rounds N]

Each round runs the same program twice in fresh processes, once with
``ncompass.capture.setup_spans.recording_setup_spans()`` active (what ``ncompass run`` does
around the program) and once without, in alternating order: torch is imported first (the
runner imports it before the program), then the program imports ``transformers``, constructs a
GPT-2 (``GPT2LMHeadModel``, a small random config) and runs 20 forward passes after two
warm-up passes. No profiler runs, so only the hooks differ. Reported: medians of the import,
construction and steady-state (20 forwards) times, wall and process CPU time (the CPU time is
what the hooks can add; on a loaded machine the wall time mostly measures the others' work), and
their ratios (measured / not measured),
plus the time to install the hooks and the spans recorded. Then, in this process, with the hooks
installed and removed in alternation: 20 forward passes of the same model (the steady state: a
much tighter comparison than across processes), and the cost per construction of a small
``nn.Linear`` (what code that builds modules in its loop pays); and the cost per import of a
fresh module that imports another (best of each side). Goal: steady state 1.00x within noise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from contextlib import nullcontext
from ncompass.capture.setup_spans import recorded_setup_spans, recording_setup_spans

def now():
    return time.perf_counter(), time.process_time()

measured = sys.argv[1] == "measured"
started = now()
context = recording_setup_spans() if measured else nullcontext()
with context:
    installed = now()
    from transformers import GPT2Config, GPT2LMHeadModel
    imported = now()
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=2000, n_positions=128)
    model = GPT2LMHeadModel(config).eval()
    constructed = now()
    tokens = torch.randint(0, 2000, (4, 64))
    with torch.no_grad():
        for _ in range(2):
            model(tokens)
        warm = now()
        for _ in range(20):
            model(tokens)
        done = now()
spans = recorded_setup_spans() if measured else []
phases = {
    "install": (started, installed),
    "imports": (installed, imported),
    "construction": (imported, constructed),
    "steady": (warm, done),
}
result = {name: end[0] - begin[0] for name, (begin, end) in phases.items()}
result |= {name + "_cpu": end[1] - begin[1] for name, (begin, end) in phases.items()}
result |= {"spans": len(spans), "kinds": sorted({span["kind"] for span in spans})}
print(json.dumps(result))
"""


def _one(mode: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _in_process_costs(repeats: int = 7) -> tuple[list[float], list[float], float, float]:
    """In this process, hooks on and off in alternation: ms per 20 forward passes of a small
    GPT-2, and µs per ``nn.Linear(8, 8)`` construction (best of each side)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from ncompass.capture.setup_spans import recording_setup_spans

    torch.set_num_threads(1)
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=2000, n_positions=128)
    model = GPT2LMHeadModel(config).eval()
    tokens = torch.randint(0, 2000, (4, 64))

    def forwards() -> float:
        with torch.no_grad():
            model(tokens)
            start = time.perf_counter()
            for _ in range(20):
                model(tokens)
        return (time.perf_counter() - start) * 1e3

    def constructions(count: int = 2000) -> float:
        start = time.perf_counter()
        for _ in range(count):
            torch.nn.Linear(8, 8)
        return (time.perf_counter() - start) / count * 1e6

    steady: dict[bool, list[float]] = {False: [], True: []}
    built: dict[bool, list[float]] = {False: [], True: []}
    for index in range(2 * repeats):
        hooked = index % 4 in (1, 2)  # off, on, on, off, ...: drift hits both alike
        with recording_setup_spans() if hooked else contextlib.nullcontext():
            steady[hooked].append(forwards())
            built[hooked].append(constructions())
    return steady[False], steady[True], min(built[False]), min(built[True])


def _import_cost(modules: int = 300, repeats: int = 5) -> tuple[float, float]:
    """Best-of µs per import of a fresh one-line module, each importing a second one (the
    nested import the hook also passes through), without then with the hooks, alternating."""
    import importlib
    import tempfile

    from ncompass.capture.setup_spans import recording_setup_spans

    best = {False: float("inf"), True: float("inf")}
    with tempfile.TemporaryDirectory() as folder:
        sys.path.insert(0, folder)
        try:
            for attempt in range(2 * repeats):
                hooked = attempt % 4 in (1, 2)
                names = [f"bench_setup_{attempt}_{index}" for index in range(modules)]
                for name in names:
                    Path(folder, f"{name}.py").write_text(f"import {name}_inner\n")
                    Path(folder, f"{name}_inner.py").write_text("VALUE = 1\n")
                importlib.invalidate_caches()
                with recording_setup_spans() if hooked else contextlib.nullcontext():
                    start = time.perf_counter()
                    for name in names:
                        importlib.import_module(name)
                    took = (time.perf_counter() - start) / modules * 1e6
                best[hooked] = min(best[hooked], took)
        finally:
            sys.path.remove(folder)
    return best[False], best[True]


def _summarize_cost(size_mb: float, runs: int) -> tuple[list[float], list[float]]:
    """Seconds of ``summarize_trace`` on a large trace without a sidecar, then with one whose
    setup span holds the first tenth of the CPU time of the first CPU operator's thread (the
    operator pass the spans need), alternating."""
    import shutil
    import tempfile

    import orjson

    from ncompass.analysis import summarize_trace
    from ncompass.traces.link import link_trace
    from ncompass.traces.reader import TraceReader

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from repeated_trace import DATA, first_source_trace, repeated_trace

    source = repeated_trace(first_source_trace(), DATA / f"setup_{size_mb:g}mb.json.gz", size_mb)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder, "big.json.gz")
        shutil.copyfile(source, trace)
        linked = link_trace(trace, progress=False)
        first = next(e for e in TraceReader(trace) if e.get("cat") == "cpu_op")
        base = float(linked.metadata.get("baseTimeNanoseconds") or 0) / 1000
        start = base + linked.origin_us + linked.cpu_start
        end = start + (linked.cpu_end - linked.cpu_start) / 10
        span = {"kind": "construction", "label": "Model", "start_unix_us": start}
        span |= {"end_unix_us": end, "pid": first["pid"], "tid": first["tid"]}
        sidecar = Path(folder, "big.ncompass.json")
        for attempt in range(2 * runs):
            with_spans = attempt % 4 in (1, 2)
            if with_spans:
                sidecar.write_bytes(orjson.dumps({"setup_spans": [span]}))
            else:
                sidecar.unlink(missing_ok=True)
            began = time.perf_counter()
            summarize_trace(trace, progress=False)
            seconds[with_spans].append(time.perf_counter() - began)
    return seconds[False], seconds[True]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--summarize-mb", type=float, default=0, help="also time summarize on a trace this large"
    )
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "measured": []}
    for round_ in range(args.rounds):
        order = ["plain", "measured"] if round_ % 2 == 0 else ["measured", "plain"]
        for mode in order:
            runs[mode].append(_one(mode))
    print(f"{args.rounds} rounds, interleaved; medians (measured / not measured)")
    print(f"{'phase':<14}{'wall: not':>12}{'measured':>12}{'ratio':>8}{'CPU: not':>12}", end="")
    print(f"{'measured':>12}{'ratio':>8}")
    for phase in ("install", "imports", "construction", "steady"):
        print(f"{phase:<14}", end="")
        for key in (phase, phase + "_cpu"):
            plain = statistics.median(run[key] for run in runs["plain"])
            hooked = statistics.median(run[key] for run in runs["measured"])
            ratio = f"{hooked / plain:.2f}x" if plain > 1e-4 else "-"
            print(f"{plain * 1e3:>10.2f}ms{hooked * 1e3:>10.2f}ms{ratio:>8}", end="")
        print()
    last = runs["measured"][-1]
    print(f"spans recorded per run: {last['spans']} ({', '.join(map(str, last['kinds']))})")
    plain_ms, hooked_ms, plain_us, hooked_us = _in_process_costs()
    off, on = statistics.median(plain_ms), statistics.median(hooked_ms)
    print(
        f"in one process, hooks off/on alternating: 20 forwards {off:.2f} ms / {on:.2f} ms "
        f"({on / off:.3f}x, medians of {len(plain_ms)}; best {min(plain_ms):.2f} / "
        f"{min(hooked_ms):.2f} ms, {min(hooked_ms) / min(plain_ms):.3f}x)"
    )
    print(
        f"nn.Linear(8, 8) construction: {plain_us:.2f} µs, with the hooks {hooked_us:.2f} µs "
        f"({hooked_us / plain_us:.2f}x, best of each; paid only while a program constructs modules)"
    )
    if args.summarize_mb:
        plain_s, spans_s = _summarize_cost(args.summarize_mb, 3)
        off, on = statistics.median(plain_s), statistics.median(spans_s)
        print(
            f"summarize of a {args.summarize_mb:g} MB trace: {off:.2f} s without setup spans, "
            f"{on:.2f} s with ({on / off:.2f}x: the operator pass the spans need)"
        )
    plain_import, hooked_import = _import_cost()
    print(
        f"import of a new module (and its own import): {plain_import:.1f} µs, with the hooks "
        f"{hooked_import:.1f} µs (+{hooked_import - plain_import:.1f} µs, best of each)"
    )


if __name__ == "__main__":
    main()

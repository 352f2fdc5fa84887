"""What measuring setup spans (imports, model construction) costs, side by side with not measuring.

    python benchmarks/bench_setup_spans.py [--rounds N]

Each round runs the same program twice in fresh processes, once with
``ncompass.capture.setup_spans.recording_setup_spans()`` active (what ``ncompass run`` does
around the program) and once without, in alternating order: torch is imported first (the
runner imports it before the program), then the program imports ``transformers``, constructs a
GPT-2 (``GPT2LMHeadModel``, a small random config) and runs 20 forward passes after two
warm-up passes. No profiler runs, so only the hooks differ. Reported: medians of the import,
construction and steady-state (20 forwards) times, and their ratios (measured / not measured),
plus the time to install the hooks and the spans recorded. Then, in this process, with the hooks
installed and removed in alternation: 20 forward passes of the same model (the steady state: a
much tighter comparison than across processes), and the cost per construction of a small
``nn.Linear`` (what code that builds modules in its loop pays). Goal: steady state 1.00x within
noise.
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

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from contextlib import nullcontext
from ncompass.capture.setup_spans import recorded_setup_spans, recording_setup_spans

measured = sys.argv[1] == "measured"
started = time.perf_counter()
context = recording_setup_spans() if measured else nullcontext()
with context:
    installed = time.perf_counter()
    from transformers import GPT2Config, GPT2LMHeadModel
    imported = time.perf_counter()
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=2000, n_positions=128)
    model = GPT2LMHeadModel(config).eval()
    constructed = time.perf_counter()
    tokens = torch.randint(0, 2000, (4, 64))
    with torch.no_grad():
        for _ in range(2):
            model(tokens)
        warm = time.perf_counter()
        for _ in range(20):
            model(tokens)
        done = time.perf_counter()
spans = recorded_setup_spans() if measured else []
print(json.dumps({
    "install": installed - started,
    "imports": imported - installed,
    "construction": constructed - imported,
    "steady": done - warm,
    "spans": len(spans),
    "kinds": sorted({span["kind"] for span in spans}),
}))
"""


def _one(mode: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "measured": []}
    for round_ in range(args.rounds):
        order = ["plain", "measured"] if round_ % 2 == 0 else ["measured", "plain"]
        for mode in order:
            runs[mode].append(_one(mode))
    print(f"{args.rounds} rounds, interleaved; medians (measured / not measured)")
    print(f"{'phase':<14}{'not measured':>14}{'measured':>12}{'ratio':>8}")
    for phase in ("install", "imports", "construction", "steady"):
        plain = statistics.median(run[phase] for run in runs["plain"])
        hooked = statistics.median(run[phase] for run in runs["measured"])
        ratio = hooked / plain if plain else float("nan")
        print(f"{phase:<14}{plain * 1e3:>12.2f}ms{hooked * 1e3:>10.2f}ms{ratio:>7.2f}x")
    last = runs["measured"][-1]
    print(f"spans recorded per run: {last['spans']} ({', '.join(map(str, last['kinds']))})")
    plain_ms, hooked_ms, plain_us, hooked_us = _in_process_costs()
    off, on = statistics.median(plain_ms), statistics.median(hooked_ms)
    print(
        f"in one process, hooks off/on alternating: 20 forwards {off:.2f} ms / {on:.2f} ms "
        f"({on / off:.3f}x, medians of {len(plain_ms)})"
    )
    print(
        f"nn.Linear(8, 8) construction: {plain_us:.2f} µs, with the hooks {hooked_us:.2f} µs "
        f"({hooked_us / plain_us:.2f}x, best of each; paid only while a program constructs modules)"
    )


if __name__ == "__main__":
    main()

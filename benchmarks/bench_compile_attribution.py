"""What attributing compiled kernels to markers costs, side by side with plain ``torch.compile``.

    python benchmarks/bench_compile_attribution.py [--runs 3] [--quick]

1. **Compilation.** A model of 6 residual MLP blocks is compiled and called once, in a fresh
   process per run, three ways, interleaved run by run: plain ``torch.compile`` with its caches
   warm (what a user sees from the second run on), plain with Inductor's FX graph and AOT
   autograd caches off, and with ncompass recording kernel provenance (which turns those
   caches off, since a cached graph brings back the source lines of whatever code was compiled
   into it first). The same children time calls of the compiled model with no profiler
   running (500 calls, median): recording also compiles C++ kernels with their profiler ranges,
   whose cost alone is measured in one process, the two compiled variants called in turns.
2. **Annotating a trace.** Adding ``args.ncompass_markers`` to the events of the most frequent
   kernels of a 54 MB trace (``benchmarks/.data``, as built for ``bench_traces.py``), against
   the peer pass that reads and writes the same trace unchanged. Each in a fresh process, with
   its peak RSS.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_traces import DATA, trace_of_size  # noqa: E402

COMPILE_CHILD = textwrap.dedent(
    """
    import json, statistics, sys, time
    mode = sys.argv[1]
    started = time.perf_counter()
    import torch
    if mode == "recording":
        from ncompass.capture.compiled_kernels import start_recording
        recorder = start_recording()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(256, 512)
            self.down = torch.nn.Linear(512, 256)
            self.norm = torch.nn.LayerNorm(256)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    torch.manual_seed(0)
    model = torch.compile(torch.nn.Sequential(*[Block() for _ in range(6)]))
    x = torch.randn(32, 256)
    with torch.no_grad():
        before = time.perf_counter()
        model(x)
        first_call = time.perf_counter() - before
        kernels = 0
        if mode == "recording":
            kernels = len(recorder.stop())
        for _ in range(20):
            model(x)
        calls = []
        for _ in range(500):
            before = time.perf_counter()
            model(x)
            calls.append(time.perf_counter() - before)
    print(json.dumps({
        "compile_s": first_call,
        "call_us": statistics.median(calls) * 1e6,
        "kernels": kernels,
    }))
    """
)

# Both variants in one process, calls interleaved in rounds: load drifts out of the ratio.
KERNEL_RANGES_CHILD = textwrap.dedent(
    """
    import json, statistics, time
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(256, 512)
            self.down = torch.nn.Linear(512, 256)
            self.norm = torch.nn.LayerNorm(256)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block() for _ in range(6)])
    x = torch.randn(1, 256)  # small: the kernels' own time does not hide the ranges' cost
    plain = torch.compile(model)
    ranged = torch.compile(model, options={"cpp.enable_kernel_profile": True})
    rounds = {"plain": [], "ranged": []}
    with torch.no_grad():
        for compiled in (plain, ranged):
            for _ in range(20):
                compiled(x)
        for _ in range(40):
            for name, compiled in (("plain", plain), ("ranged", ranged)):
                before = time.perf_counter()
                for _ in range(25):
                    compiled(x)
                rounds[name].append((time.perf_counter() - before) / 25)
    print(json.dumps({name: statistics.median(times) * 1e6 for name, times in rounds.items()}))
    """
)

ANNOTATE_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from collections import Counter
    mode, source, target = sys.argv[1:4]
    from ncompass.traces.reader import TraceReader
    from ncompass.traces.writer import TraceWriter
    from ncompass.traces.annotate import annotate_trace
    import shutil
    shutil.copyfile(source, target)
    names = Counter(
        event.get("name") for event in TraceReader(target) if event.get("cat") == "kernel"
    )
    chosen = {name: ["marker"] for name, _ in names.most_common(10)}
    started = time.perf_counter()
    if mode == "annotate":
        changed = annotate_trace(
            target,
            lambda e: {"ncompass_markers": chosen[e["name"]]}
            if e.get("ph") == "X" and e.get("name") in chosen else None,
        )
    else:
        reader = TraceReader(target)
        with TraceWriter(target + ".copy.json.gz") as writer:
            for batch in reader.batches():
                writer.write_many(batch)
        changed = 0
    elapsed = time.perf_counter() - started
    peak_kb = 0
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            peak_kb = int(line.split()[1])
    print(json.dumps({"seconds": elapsed, "peak_mb": peak_kb / 1024, "changed": changed}))
    """
)

COMPILE_MODES = ("plain", "plain-no-cache", "recording")
NO_CACHE = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per variant (median)")
    parser.add_argument("--quick", action="store_true", help="one run each, compile only")
    parser.add_argument("--only", choices=("compile", "annotate"), help="one part only")
    arguments = parser.parse_args()
    runs = 1 if arguments.quick else arguments.runs
    if arguments.only != "annotate":
        bench_compilation(runs)
        bench_kernel_ranges()
    if not arguments.quick and arguments.only != "compile":
        bench_annotation(runs)


def bench_compilation(runs: int) -> None:
    for mode in ("plain", "recording"):  # warm the caches (and the compiled C++ kernels)
        child(COMPILE_CHILD, [mode], {})
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in COMPILE_MODES}
    for _ in range(runs):
        for mode in COMPILE_MODES:
            extra = NO_CACHE if mode == "plain-no-cache" else {}
            results[mode].append(child(COMPILE_CHILD, [mode], extra))
    print("compilation (first call of the compiled model) and steady calls, medians:")
    plain = _median(results["plain"], "compile_s")
    cold = _median(results["plain-no-cache"], "compile_s")
    plain_call = _median(results["plain"], "call_us")
    for mode in COMPILE_MODES:
        compile_s = _median(results[mode], "compile_s")
        call_us = _median(results[mode], "call_us")
        print(
            f"  {mode:15s} compile {compile_s:6.2f} s ({compile_s / plain:4.2f}x warm, "
            f"{compile_s / cold:4.2f}x no-cache)  call {call_us:8.1f} us "
            f"({call_us / plain_call:4.2f}x)"
        )
    print(f"  kernels recorded: {results['recording'][0]['kernels']}")


def bench_kernel_ranges() -> None:
    result = child(KERNEL_RANGES_CHILD, [], {})
    plain, ranged = result["plain"], result["ranged"]
    print(
        "\nC++ kernels compiled with their profiler ranges, no profiler running (one process, "
        f"interleaved): {ranged:.1f} us per call vs {plain:.1f} us plain ({ranged / plain:.3f}x)"
    )


def bench_annotation(runs: int) -> None:
    anchor = trace_of_size(54.0)
    results: dict[str, list[dict[str, Any]]] = {"copy": [], "annotate": []}
    with tempfile.TemporaryDirectory() as folder:
        target = str(Path(folder) / "trace.json.gz")
        for _ in range(runs):
            for mode in results:
                results[mode].append(child(ANNOTATE_CHILD, [mode, str(anchor), target], {}))
    copy_s = _median(results["copy"], "seconds")
    print(f"\nannotating {anchor.name} (54 MB of JSON), medians:")
    for mode, measured in results.items():
        seconds = _median(measured, "seconds")
        print(
            f"  {mode:9s} {seconds:6.2f} s ({seconds / copy_s:4.2f}x copy)  peak "
            f"{_median(measured, 'peak_mb'):5.0f} MB  events changed {measured[0]['changed']}"
        )


def child(source: str, arguments: list[str], extra_env: dict[str, str]) -> dict[str, Any]:
    env = {**os.environ, **extra_env, "PYTHONPATH": str(REPO)}
    # From a file: Dynamo keeps no source stack for code compiled from a `-c` string.
    script = DATA / f"compile_attribution_{hashlib.sha1(source.encode()).hexdigest()[:12]}.py"
    DATA.mkdir(parents=True, exist_ok=True)
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, str(script), *arguments],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"benchmark child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _median(results: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(result[key]) for result in results)


if __name__ == "__main__":
    main()

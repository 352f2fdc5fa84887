"""Post-processing passes on a large trace: the whole-document way against the streamed one.

    python benchmarks/bench_trace_passes.py [--size-mb 250] [--runs 3]

Two passes ``ncompass run`` makes after the profiler wrote its trace: cutting a window (a nested
``capture_trace`` call) out of it, and adding ``--gpu-monitor`` counter tracks to it. "before"
is how they were written until now (``orjson.loads`` of the whole file, edit, ``orjson.dumps``),
kept here as the peer; "after" is ``ncompass.traces.windows`` / ``ncompass.traces.counters``,
which stream through ``TraceReader`` and ``TraceWriter``. The trace is built under
``benchmarks/.data`` by ``benchmarks/traces/make_trace.py`` (gzip level 1); the window is the
middle ``ProfilerStep``. Each run is a fresh child process reporting its own peak RSS (VmHWM)
and time; medians over ``--runs``, interleaved before/after.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from repeated_trace import DATA, HERE, first_source_trace, repeated_trace

PASSES = ("window", "counters")
SAMPLES = 2000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=float, default=250.0, help="trace size (JSON)")
    parser.add_argument("--runs", type=int, default=3, help="runs per pass and way (median)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)  # PASS WAY TRACE MARKER
    options = parser.parse_args()
    if options.child:
        child(*options.child)
        return
    trace = build_trace(options.size_mb)
    marker = middle_step(trace)
    print(f"trace: {trace.name}, {trace.stat().st_size / 1e6:.0f} MB gzip, window {marker}")
    print(f"{'pass':<9} {'way':<7} {'time s':>8} {'peak RSS MB':>12}")
    for name in PASSES:
        found: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for _ in range(options.runs):
            for way in found:
                found[way].append(run_child(name, way, trace, marker))
        medians = {
            way: (statistics.median(t for t, _ in runs), statistics.median(m for _, m in runs))
            for way, runs in found.items()
        }
        for way, (seconds, peak) in medians.items():
            print(f"{name:<9} {way:<7} {seconds:>8.2f} {peak:>12.0f}")
        ratio = medians["before"][1] / medians["after"][1]
        speed = medians["before"][0] / medians["after"][0]
        print(f"{name:<9} after uses 1/{ratio:.1f} of the memory, at {speed:.2f}x the speed")


def build_trace(size_mb: float) -> Path:
    path = DATA / f"passes_{size_mb:g}mb.json.gz"
    return repeated_trace(first_source_trace(), path, size_mb)


def run_child(name: str, way: str, trace: Path, marker: str) -> tuple[float, float]:
    work = DATA / f"pass-{os.getpid()}{''.join(trace.suffixes)}"
    work.write_bytes(trace.read_bytes())  # the counters pass rewrites its trace in place
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", name, way, str(work), marker],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(HERE.parent)},
        )
    finally:
        work.unlink(missing_ok=True)
        for leftover in DATA.glob(f"window-{os.getpid()}*"):
            leftover.unlink()
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["seconds"], report["peak_kb"] / 1024


def child(name: str, way: str, trace_path: str, marker: str) -> None:
    trace = Path(trace_path)
    started = time.perf_counter()
    if name == "window":
        output = DATA / f"window-{os.getppid()}.json.gz"
        if way == "before":
            window_before(trace, marker, output)
        else:
            from ncompass.traces.windows import WindowCut, write_windows

            write_windows(trace, [WindowCut(marker, "window", output)])
    elif way == "before":
        counters_before(trace)
    else:
        counters_after(trace)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "peak_kb": peak_rss_kb()}))


def middle_step(trace: Path) -> str:
    """The name of the trace's middle ``ProfilerStep#N`` marker (read by streaming)."""
    from ncompass.traces import TraceReader

    steps = [
        event["name"]
        for event in TraceReader(trace)
        if event.get("ph") == "X" and str(event.get("name", "")).startswith("ProfilerStep#")
    ]
    return str(steps[len(steps) // 2])


def samples(base_ns: int, count: int = SAMPLES) -> list[Any]:
    from ncompass.gpu import GpuSample

    return [
        GpuSample(0, base_ns + i * 10_000_000, i * 10_000_000, util_gpu=float(i % 100))  # type: ignore[arg-type]
        for i in range(count)
    ]


# -- before: the whole-document implementations, as they were --------------------------------


def load(path: Path) -> dict[str, Any]:
    import orjson

    raw = path.read_bytes()
    document: dict[str, Any] = orjson.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    return document


def save(path: Path, document: dict[str, Any]) -> None:
    import orjson

    data = orjson.dumps(document)
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def window_before(trace: Path, marker: str, output: Path) -> None:
    document = load(trace)
    events: list[dict[str, Any]] = document.get("traceEvents", [])
    metadata = [event for event in events if event.get("ph") == "M"]
    span = next(e for e in events if e.get("name") == marker and e.get("ph") == "X")
    start = float(span["ts"])
    end = start + float(span.get("dur", 0))
    kept = []
    for event in events:
        if event.get("ph") == "M":
            continue
        ts = event.get("ts")
        if not isinstance(ts, int | float):
            continue
        if ts + (event.get("dur") or 0) >= start and ts <= end:
            kept.append({**event, "name": "window"} if event.get("name") == marker else event)
    save(output, {**document, "traceEvents": metadata + kept})


def counters_before(trace: Path) -> None:
    from ncompass.gpu import timeline

    document = load(trace)
    base = int(document.get("baseTimeNanoseconds", 0))
    timeline.add_counter_tracks(document, samples(base))
    timeline.marker_ranges(document)
    save(trace, document)


def counters_after(trace: Path) -> None:
    from ncompass.gpu import timeline
    from ncompass.traces.counters import CounterPlacement, append_counter_tracks

    def counters_at(placement: CounterPlacement) -> list[dict[str, Any]]:
        base = round(-placement.clock_offset_us * 1000)
        added = [timeline.process_name_event(placement.pid)] if placement.new_process else []
        return added + timeline.counter_events(
            samples(base), pid=placement.pid, clock_offset_us=placement.clock_offset_us
        )

    append_counter_tracks(trace, counters_at)


def peak_rss_kb() -> int:
    """This process's own peak RSS since exec (VmHWM)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


if __name__ == "__main__":
    main()

"""Gzip inflate and deflate for traces: zlib against ISA-L (``isal``) and zlib-ng, side by side.

    python benchmarks/bench_inflate.py [--runs 3] [--deflate-mb 64] [--no-huge]

Inflate: each gzip trace is streamed the way ``TraceReader`` streams it (64 KiB compressed
reads, inflated chunks of at most 64 KiB) with each library in turn, interleaved, and the
median CPU seconds per GB of JSON is reported with the ratio to zlib. The traces are
``benchmarks/.data/anchor-250MB.json.gz`` and ``anchor-1000MB.json.gz`` (gzip level 1, built
by ``bench_traces.py``) and a level-6 copy of the 250 MB JSON made here on first use. The row
``ncompass`` is the reader's own inflater (``ncompass.traces._inflate``), whichever library
it picked, so its overhead over the bare loop shows.

Reader: ``TraceReader.link_batches`` drained over the 1 GB trace in a fresh process, with
zlib-ng and with it hidden (the zlib fallback), interleaved: CPU seconds per GB and peak RSS
(VmHWM), to show what the inflater changes in the whole read.

Deflate: the first ``--deflate-mb`` MB of the 250 MB JSON compressed at the level
``TraceWriter`` uses (6) and at level 1, by each library (ISA-L has levels 0-3 only), with
the CPU seconds per GB and the compressed size as a share of the JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
sys.path.insert(0, str(HERE.parent))

from ncompass.traces import _inflate  # noqa: E402 - after the path above

READ_SIZE = _inflate.COMPRESSED_READ_SIZE
CHUNK_SIZE = _inflate.INFLATED_CHUNK_SIZE
DEFLATE_BLOCK = 1 << 20
LIBRARIES = {"zlib": "zlib", "isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng"}
# (library, level) pairs compared for deflate; the writer's level is 6.
DEFLATE_LEVELS = {"zlib": (6, 1), "isal": (3, 2, 1), "zlib-ng": (6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per library (median)")
    parser.add_argument("--deflate-mb", type=int, default=64, help="JSON compressed per run")
    parser.add_argument("--no-huge", action="store_true", help="skip the 1 GB trace")
    parser.add_argument("--child-reader", nargs=2, help=argparse.SUPPRESS)  # LIBRARY TRACE
    options = parser.parse_args()
    if options.child_reader:
        read_in_child(*options.child_reader)
        return
    libraries = available_libraries()
    print("libraries:", ", ".join(libraries), f"(the reader uses {_inflate.inflater().__name__})")
    traces = [DATA / "anchor-250MB.json.gz", level_six_copy(DATA / "anchor-250MB.json")]
    if not options.no_huge:
        traces.insert(1, DATA / "anchor-1000MB.json.gz")
    for trace in traces:
        if not trace.exists():
            sys.exit(f"{trace} is missing: run benchmarks/bench_traces.py --huge first")
        report_inflate(trace, libraries, options.runs)
    huge = DATA / ("anchor-250MB.json.gz" if options.no_huge else "anchor-1000MB.json.gz")
    report_reader(huge, options.runs)
    report_deflate(DATA / "anchor-250MB.json", libraries, options.deflate_mb << 20, options.runs)


def available_libraries() -> dict[str, ModuleType]:
    found = {}
    for name, module in LIBRARIES.items():
        try:
            found[name] = importlib.import_module(module)
        except ImportError:
            print(f"{name} is not installed: skipped")
    return found


def level_six_copy(json_path: Path) -> Path:
    path = DATA / "anchor-250MB.level6.json.gz"
    if not path.exists():
        if not json_path.exists():
            sys.exit(f"{json_path} is missing: run benchmarks/bench_traces.py --huge first")
        print(f"building {path.name} (first run only)...", flush=True)
        partial = path.with_suffix(".partial")
        compressor = zlib.compressobj(6, wbits=31)
        with open(json_path, "rb") as source, open(partial, "wb") as target:
            while block := source.read(DEFLATE_BLOCK):
                target.write(compressor.compress(block))
            target.write(compressor.flush())
        partial.replace(path)
    return path


def inflate_with(module: ModuleType, path: Path) -> int:
    """Stream ``path`` through ``module``'s gzip inflater as the reader does; the JSON size."""
    total = 0
    decompressor = module.decompressobj(wbits=31)
    with open(path, "rb") as handle:
        while raw := handle.read(READ_SIZE):
            while raw:
                total += len(decompressor.decompress(raw, CHUNK_SIZE))
                raw = decompressor.unconsumed_tail
                if decompressor.eof:
                    raw = decompressor.unused_data
                    decompressor = module.decompressobj(wbits=31)
    return total


def inflate_with_reader(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(len(chunk) for chunk, _ in _inflate.gunzip(handle, path))


def cpu_seconds(work: Callable[[], int]) -> tuple[float, int]:
    start = time.process_time()
    size = work()
    return time.process_time() - start, size


def report_inflate(trace: Path, libraries: dict[str, ModuleType], runs: int) -> None:
    ways: dict[str, Callable[[], int]] = {
        name: (lambda module=module: inflate_with(module, trace))
        for name, module in libraries.items()
    }
    ways["ncompass"] = lambda: inflate_with_reader(trace)
    found: dict[str, list[float]] = {name: [] for name in ways}
    json_bytes = 0
    for _ in range(runs):
        for name, work in ways.items():
            seconds, size = cpu_seconds(work)
            found[name].append(seconds)
            json_bytes = json_bytes or size
            if size != json_bytes:
                sys.exit(f"{name} inflated {size} bytes of {trace.name}, not {json_bytes}")
    gigabytes = json_bytes / 1e9
    print(
        f"\ninflate {trace.name}: {trace.stat().st_size / 1e6:.0f} MB gzip, {gigabytes:.2f} GB JSON"
    )
    print(f"{'library':<10} {'CPU s':>7} {'s per GB':>9} {'vs zlib':>8}")
    baseline = statistics.median(found["zlib"])
    for name, times in found.items():
        seconds = statistics.median(times)
        per_gb = seconds / gigabytes
        print(f"{name:<10} {seconds:>7.2f} {per_gb:>9.2f} {baseline / seconds:>7.2f}x")


def read_in_child(library: str, trace: str) -> None:
    if library == "zlib":
        for name in ("zlib_ng", "zlib_ng.zlib_ng", "zlib_ng.gzip_ng"):
            sys.modules[name] = None  # type: ignore[assignment] - as if not installed
    from ncompass.traces.reader import TraceReader

    start = time.process_time()
    events = sum(len(batch) for batch in TraceReader(trace, progress=False).link_batches())
    seconds = time.process_time() - start
    status = Path("/proc/self/status").read_text()
    peak_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
    used = _inflate.inflater().__name__
    print(
        json.dumps({"seconds": seconds, "peak_mb": peak_kb / 1024, "events": events, "used": used})
    )


def report_reader(trace: Path, runs: int) -> None:
    found: dict[str, list[dict[str, float]]] = {"zlib-ng": [], "zlib": []}
    for _ in range(runs):
        for library, results in found.items():
            done = subprocess.run(
                [sys.executable, __file__, "--child-reader", library, str(trace)],
                check=True,
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(HERE.parent)},
            )
            results.append(json.loads(done.stdout))
    gigabytes = DATA.joinpath(trace.name.removesuffix(".gz")).stat().st_size / 1e9
    print(f"\nTraceReader.link_batches over {trace.name} ({gigabytes:.2f} GB JSON), fresh process")
    print(f"{'library':<10} {'CPU s':>7} {'s per GB':>9} {'peak MB':>8} {'events':>10}")
    for library, results in found.items():
        seconds = statistics.median(result["seconds"] for result in results)
        peak = statistics.median(result["peak_mb"] for result in results)
        events = int(results[0]["events"])
        print(
            f"{library:<10} {seconds:>7.2f} {seconds / gigabytes:>9.2f} {peak:>8.0f} {events:>10}"
        )


def deflate_with(module: ModuleType, level: int, text: bytes) -> int:
    compressor = module.compressobj(level, wbits=31)
    size = 0
    for start in range(0, len(text), DEFLATE_BLOCK):
        size += len(compressor.compress(text[start : start + DEFLATE_BLOCK]))
    return size + len(compressor.flush())


def report_deflate(json_path: Path, libraries: dict[str, ModuleType], size: int, runs: int) -> None:
    with open(json_path, "rb") as handle:
        text = handle.read(size)
    ways = {
        (name, level): module
        for name, module in libraries.items()
        for level in DEFLATE_LEVELS[name]
    }
    found: dict[tuple[str, int], list[float]] = {way: [] for way in ways}
    sizes: dict[tuple[str, int], int] = {}
    for _ in range(runs):
        for (name, level), module in ways.items():
            seconds, sizes[name, level] = cpu_seconds(
                lambda module=module, level=level: deflate_with(module, level, text)
            )
            found[name, level].append(seconds)
    gigabytes = len(text) / 1e9
    print(f"\ndeflate the first {len(text) >> 20} MB of {json_path.name}")
    print(
        f"{'library':<10} {'level':>5} {'CPU s':>7} {'s per GB':>9} {'vs zlib 6':>10} {'size':>7}"
    )
    baseline = statistics.median(found["zlib", 6])
    for (name, level), times in found.items():
        seconds = statistics.median(times)
        share = sizes[name, level] / len(text)
        print(
            f"{name:<10} {level:>5} {seconds:>7.2f} {seconds / gigabytes:>9.2f} "
            f"{baseline / seconds:>9.2f}x {share:>6.1%}"
        )


if __name__ == "__main__":
    main()

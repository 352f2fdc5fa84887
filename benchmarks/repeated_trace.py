"""Build a benchmark trace once: a real trace repeated to a size by ``traces/make_trace.py``.

The benchmarks that need a large trace share this: the file is built under ``benchmarks/.data``
on the first run (gzip level 1, under a temporary name moved into place when complete) and
reused afterwards.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
SOURCE = HERE.parent / "tests" / "data" / "traces" / "hta" / "ns_resolution_trace"


def first_source_trace() -> Path:
    """HTA's ``ns_resolution_trace`` (its first rank), the trace the benchmarks repeat."""
    return sorted(SOURCE.glob("*.json.gz"))[0]


def repeated_trace(source: Path, path: Path, size_mb: float) -> Path:
    """``path``, built from ``source`` repeated to ``size_mb`` MB of JSON if it does not exist."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    print(f"building {path.name} (first run only)...", flush=True)
    command = [sys.executable, str(HERE / "traces" / "make_trace.py"), str(source), str(partial)]
    options = ["--size-mb", str(size_mb), "--level", "1"]
    subprocess.run([*command, *options], check=True, stdout=subprocess.DEVNULL)
    partial.replace(path)
    return path

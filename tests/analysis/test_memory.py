"""Memory of summarize and breakdown on kernel-heavy traces whose kernel names are all distinct
(what the reader keeps grows with the names there, not only with the events)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_PEAK = """
import sys
what, path = sys.argv[1], sys.argv[2]
if what == "summarize":
    from ncompass.analysis.summary import summarize_trace
    summarize_trace(path)
else:
    from ncompass.analysis.breakdown import breakdown
    breakdown([path])
print(next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM:")) << 10)
"""


def distinct_kernels(path: Path, megabytes: float) -> Path:
    """Kineto-like launches, kernels and flow events; every kernel has a name of its own."""
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
            "ts": 0, "dur": 10**9}  # fmt: skip
    with open(path, "w") as out:
        out.write('{"traceEvents": [' + json.dumps(step))
        written = index = 0
        while written < megabytes * 1e6:
            ts = 10 + 10 * index
            name = "void at::native::vectorized_elementwise_kernel<4, at::native::"
            name += f"CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, {index})"
            events = [
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                 "tid": 1, "ts": ts, "dur": 4,
                 "args": {"External id": index, "cbid": 211, "correlation": index}},
                {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 5,
                 "dur": 3,
                 "args": {"External id": index, "queued": 0, "device": 0, "context": 1,
                          "stream": 7, "correlation": index, "registers per thread": 16,
                          "shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2.0,
                          "grid": [40, 1, 1], "block": [128, 1, 1],
                          "est. achieved occupancy %": 3}},
                {"ph": "s", "id": index, "pid": 1, "tid": 1, "ts": ts, "cat": "ac2g",
                 "name": "ac2g"},
                {"ph": "f", "id": index, "pid": 0, "tid": 7, "ts": ts + 5, "cat": "ac2g",
                 "name": "ac2g", "bp": "e"},
            ]  # fmt: skip
            text = "".join("," + json.dumps(event) for event in events)
            out.write(text)
            written += len(text)
            index += 1
        out.write("]}")
    return path


def peak_bytes(what: str, path: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, what, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return int(done.stdout)


@pytest.mark.parametrize("what", ["summarize", "breakdown"])
def test_distinct_kernel_names_cost_less_memory_than_the_trace_text(
    what: str, tmp_path: Path
) -> None:
    # found by trying it: 1.1 MB per MB of JSON above the interpreter's own (a second copy of
    # every name in the C fold's token table, a tuple per kernel in the timeline)
    trace = distinct_kernels(tmp_path / "t.json", 100)
    small = distinct_kernels(tmp_path / "small.json", 0.05)
    grown = peak_bytes(what, trace) - peak_bytes(what, small)
    assert grown < 0.9 * trace.stat().st_size, grown / trace.stat().st_size

"""Memory of summarize and breakdown on kernel-heavy traces: at most half the trace's size, with
every kernel name distinct (what is kept grows with the names there, not only with the events)
or with minimal events (what is kept per kernel is then a large part of its text)."""

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

_STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 10**9}  # fmt: skip
# Kineto-like: a launch, its kernel (whose name ends with its own number) and the flow events.
_DISTINCT = (
    ',{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
    '"ts": %(ts)d, "dur": 4, "args": {"External id": %(i)d, "cbid": 211, "correlation": %(i)d}}'
    ',{"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, '
    'at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, %(i)d)", "pid": 0, '
    '"tid": 7, "ts": %(kernel_ts)d, "dur": 3, "args": {"External id": %(i)d, "queued": 0, '
    '"device": 0, "context": 1, "stream": 7, "correlation": %(i)d, "registers per thread": 16, '
    '"shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2.0, "grid": [40, 1, 1], '
    '"block": [128, 1, 1], "est. achieved occupancy %%": 3}}'
    ',{"ph": "s", "id": %(i)d, "pid": 1, "tid": 1, "ts": %(ts)d, "cat": "ac2g", "name": "ac2g"}'
    ',{"ph": "f", "id": %(i)d, "pid": 0, "tid": 7, "ts": %(kernel_ts)d, "cat": "ac2g", '
    '"name": "ac2g", "bp": "e"}'
)
# About 120 bytes an event: a launch and its kernel, 20 names.
_MINIMAL = (
    ',{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
    '"ts": %(ts)d, "dur": 1, "args": {"correlation": %(i)d}}'
    ',{"ph": "X", "cat": "kernel", "name": "gemm_%(name)d", "pid": 0, "tid": 7, '
    '"ts": %(kernel_ts)d, "dur": 1, "args": {"correlation": %(i)d}}'
)
_SHAPES = {"distinct": _DISTINCT, "minimal": _MINIMAL}


def kernel_trace(path: Path, shape: str, megabytes: float) -> Path:
    """About ``megabytes`` MB of kernels and their launches, of one of :data:`_SHAPES`."""
    template = _SHAPES[shape]
    with open(path, "w") as out:
        out.write('{"traceEvents": [' + json.dumps(_STEP))
        written = index = 0
        while written < megabytes * 1e6:
            ts = 10 + 10 * index
            text = "".join(
                template % {"i": i, "ts": ts + 10 * n, "kernel_ts": ts + 10 * n + 5, "name": i % 20}
                for n, i in enumerate(range(index, index + 1000))
            )
            out.write(text)
            written += len(text)
            index += 1000
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


@pytest.mark.parametrize("shape", sorted(_SHAPES))
@pytest.mark.parametrize("what", ["summarize", "breakdown"])
def test_kernel_heavy_traces_cost_at_most_half_their_size(
    what: str, shape: str, tmp_path: Path
) -> None:
    # Peak RSS above that of the same command on a tiny trace (the interpreter, the imports and
    # constant buffers), over the file's size. Found by trying it, per byte of JSON: 0.75-0.84
    # before (a dict entry and an int per name in the fold, a KernelStats per name, 8-byte index
    # columns, sweeps that copied their results, a list of floats per launch statistic); 0.37-0.40
    # now. Memory is not load-sensitive.
    trace = kernel_trace(tmp_path / "t.json", shape, 50)
    small = kernel_trace(tmp_path / "small.json", shape, 0.05)
    grown = peak_bytes(what, trace) - peak_bytes(what, small)
    assert grown <= 0.5 * trace.stat().st_size, grown / trace.stat().st_size

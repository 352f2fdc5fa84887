"""Traces of one kind each, generated at a given size (nothing large is committed): what the
reader's memory is bounded by, per kind (tests/traces/test_reader_memory.py,
benchmarks/bench_reader_memory.py)."""

from __future__ import annotations

from pathlib import Path

_MARKER = '{"ph":"X","cat":"user_annotation","name":"step %d","pid":1,"tid":1,"ts":%d,"dur":1}'
_KERNEL = (
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
    '"ts": %(ts)d, "dur": 4, "args": {"External id": %(i)d, "cbid": 211, "correlation": %(i)d}},'
    '{"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, '
    'at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, %(i)d)", "pid": 0, '
    '"tid": 7, "ts": %(kernel_ts)d, "dur": 3, "args": {"External id": %(i)d, "queued": 0, '
    '"device": 0, "context": 1, "stream": 7, "correlation": %(i)d, "registers per thread": 16, '
    '"shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2.0, "grid": [40, 1, 1], '
    '"block": [128, 1, 1], "est. achieved occupancy %%": 3}},'
    '{"ph": "s", "id": %(i)d, "pid": 1, "tid": 1, "ts": %(ts)d, "cat": "ac2g", "name": "ac2g"},'
    '{"ph": "f", "id": %(i)d, "pid": 0, "tid": 7, "ts": %(kernel_ts)d, "cat": "ac2g", '
    '"name": "ac2g", "bp": "e"}'
)
_STEP = (
    '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,'
    '"dur":1000000000}'
)


def write_trace(path: Path, kind: str, megabytes: float) -> Path:
    """About ``megabytes`` MB of JSON of ``kind``: ``header`` (one object of short keys before
    the events), ``markers`` (markers only, one line, 100 names) or ``kernels`` (Kineto-like
    launches, kernels and flows, every kernel name distinct)."""
    goal = int(megabytes * 1e6)
    with open(path, "w") as out:
        if kind == "header":
            out.write('{"distributedInfo": {')
            written = index = 0
            while written < goal:
                text = ",".join(f'"k{i}": "v"' for i in range(index, index + 10_000))
                out.write(("," if index else "") + text)
                written += len(text) + 1
                index += 10_000
            out.write('}, "traceEvents": [' + _STEP + "]}")
            return path
        out.write('{"traceEvents": [' + _STEP)
        written = index = 0
        while written < goal:
            if kind == "markers":
                text = "".join(
                    "," + _MARKER % (i % 100, 10 + 2 * i) for i in range(index, index + 10_000)
                )
            else:
                text = "".join(
                    "," + _KERNEL % {"i": i, "ts": 10 + 10 * i, "kernel_ts": 15 + 10 * i}
                    for i in range(index, index + 1000)
                )
            out.write(text)
            written += len(text)
            index += 10_000 if kind == "markers" else 1000
        out.write("]}")
    return path

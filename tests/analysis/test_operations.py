from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from ncompass.analysis.markers import marker_stats
from ncompass.analysis.operations import build_operations, kernel_stats
from ncompass.traces.link import link_trace
from tests.traces.builders import TraceBuilder, shared_traces


def test_operations_list_markers_kernels_and_cpu_ops_with_shares(tmp_path: Path) -> None:
    builder = (
        TraceBuilder().marker("fwd", 0, 50).cpu_op("aten::mm", 0, 100).cpu_op("aten::mm", 100, 100)
    )
    builder.launch("gemm", 1, 1, 10, 30)
    builder.launch("gemm", 2, 1, 40, 10)
    builder.launch("Memcpy DtoH (Device -> Pinned)", 60, 1, 60, 10, category="gpu_memcpy", bytes=64)
    trace = link_trace(builder.write(tmp_path / "t.json"))
    kernels = kernel_stats(trace)
    assert list(kernels) == ["gemm", "Memcpy DtoH (Device -> Pinned)"]
    assert (kernels["gemm"].calls, kernels["gemm"].total_us, kernels["gemm"].mean_us) == (
        2,
        40.0,
        20.0,
    )
    assert kernels["Memcpy DtoH (Device -> Pinned)"].kernel_class == "memory"
    operations = build_operations(trace, marker_stats(trace), kernels, top=1)
    by_kind = {op["kind"]: op for op in operations}
    assert len(operations) == 3  # top=1 of each kind
    assert by_kind["marker"]["name"] == "fwd"
    assert by_kind["marker"]["share_of_cpu_time"] == 50 / 200  # CPU wall: 0..200
    assert by_kind["marker"]["share_of_gpu_time"] == 40 / 50  # GPU busy sum: 50
    assert by_kind["kernel"]["share_of_gpu_time"] == 40 / 50
    assert by_kind["cpu_op"] == {
        "kind": "cpu_op",
        "name": "aten::mm",
        "calls": 2,
        "total_us": 200.0,
        "mean_us": 100.0,
        "max_us": 100.0,
        "share_of_cpu_time": 1.0,
    }


@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_traces_kernel_and_operator_totals(path: Path) -> None:
    events = [
        e
        for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        if e.get("ph") == "X"
    ]
    kernel_totals: Counter[str] = Counter()
    operator_calls: Counter[str] = Counter()
    for event in events:
        category = str(event.get("cat")).lower()
        if category in {"kernel", "gpu_memcpy", "gpu_memset"}:
            kernel_totals[event["name"]] += event["dur"]
        elif category == "cpu_op":
            operator_calls[event["name"]] += 1
    trace = link_trace(path)
    kernels = kernel_stats(trace)
    assert {name: pytest.approx(total) for name, total in kernel_totals.items()} == {
        name: entry.total_us for name, entry in kernels.items()
    }
    assert {name: totals.calls for name, totals in trace.cpu_operators.items()} == operator_calls

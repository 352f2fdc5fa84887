from __future__ import annotations

from pathlib import Path

from ncompass.analysis.markers import marker_stats
from ncompass.analysis.operations import build_operations, kernel_stats
from ncompass.traces.link import link_trace
from tests.traces.builders import TraceBuilder


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

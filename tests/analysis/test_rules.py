from __future__ import annotations

from pathlib import Path

import pytest

from ncompass.analysis.breakdown import rank_breakdown
from ncompass.analysis.markers import marker_stats
from ncompass.analysis.operations import kernel_stats
from ncompass.analysis.rules import Bottleneck, RuleInput, find_bottlenecks
from ncompass.traces.link import link_trace
from tests.traces.builders import TraceBuilder


def findings(path: Path) -> dict[str, Bottleneck]:
    trace = link_trace(path)
    facts = RuleInput(trace, rank_breakdown(trace, 0), marker_stats(trace), kernel_stats(trace))
    found = find_bottlenecks(facts)
    return {finding.rule: finding for finding in found}


@pytest.fixture
def launch_bound(tmp_path: Path) -> Path:
    """A decode loop launching 60 tiny kernels, each taking longer to launch than to run."""
    builder = TraceBuilder().marker("decode", 0, 1200)
    for step in range(60):
        builder.launch("tiny_kernel", step * 20, 10, step * 20 + 12, 2)
    builder.marker("load", 1300, 100)
    builder.launch(
        "Memcpy HtoD (Pageable -> Device)", 1310, 5, 1320, 40, category="gpu_memcpy", bytes=4096
    )
    builder.marker("eval", 1500, 100)
    builder.runtime("cudaStreamSynchronize", 1510, 50)
    return builder.write(tmp_path / "launch_bound.json")


def test_host_bound_idle_gpu_names_the_marker(launch_bound: Path) -> None:
    finding = findings(launch_bound)["gpu-idle-host-bound"]
    assert (finding.subject_kind, finding.subject, finding.severity) == ("marker", "decode", "high")
    assert finding.evidence["idle_fraction"] > 0.8
    assert finding.evidence["host_bound_gaps"] == 60  # 59 inside decode + the one before the copy
    assert "decode" in finding.recommendation


def test_tiny_kernels_are_reported_with_their_marker(launch_bound: Path) -> None:
    finding = findings(launch_bound)["launch-bound-tiny-kernels"]
    assert finding.subject == "decode"
    assert finding.evidence["kernels_shorter_than_launch"] == 60
    assert finding.evidence["median_gpu_duration_us"] == 2.0
    assert finding.evidence["median_launch_cpu_us"] == 10.0


def test_pageable_copies_are_reported(launch_bound: Path) -> None:
    finding = findings(launch_bound)["pageable-memcpy"]
    assert (finding.subject, finding.evidence["copies"], finding.evidence["bytes"]) == (
        "load",
        1,
        4096,
    )
    assert finding.evidence["total_us"] == 40.0
    assert "pin_memory" in finding.recommendation


def test_synchronization_inside_a_marker_is_reported(launch_bound: Path) -> None:
    finding = findings(launch_bound)["sync-in-marker"]
    assert (finding.subject, finding.severity) == ("eval", "high")
    assert finding.evidence["share_of_marker"] == 0.5


def test_dominant_marker_and_kernel(launch_bound: Path) -> None:
    found = findings(launch_bound)
    assert found["dominant-marker"].subject == "decode"
    assert found["dominant-marker"].evidence["share"] == pytest.approx(1200 / 1600)
    assert found["dominant-kernel"].subject == "tiny_kernel"


def test_findings_are_ordered_by_severity(launch_bound: Path) -> None:
    order = {"high": 0, "medium": 1, "low": 2}
    severities = [order[f.severity] for f in findings(launch_bound).values()]
    assert severities == sorted(severities)


def test_exposed_communication(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("train", 0, 200)
    builder.launch("ncclKernel_AllReduce", 0, 1, 10, 100, stream=8)
    builder.launch("gemm", 1, 1, 10, 20, stream=7)
    finding = findings(builder.write(tmp_path / "t.json"))["exposed-communication"]
    assert finding.subject == "ncclKernel_AllReduce"
    assert finding.evidence["exposed_us"] == 80.0
    assert finding.severity == "high"


def test_a_cpu_only_trace_gets_no_advice_to_use_a_gpu(tmp_path: Path) -> None:
    # the report's first line says "CPU only (no GPU events)": once, not as a finding too
    path = TraceBuilder().marker("m", 0, 10).cpu_op("aten::mm", 0, 30).write(tmp_path / "t.json")
    assert set(findings(path)) == set()


def test_a_healthy_trace_fires_nothing(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("small", 0, 10).cpu_op("aten::work", 0, 1000)
    for index, name in enumerate(["gemm_a", "gemm_b", "gemm_c"] * 10):
        builder.launch(name, index, 1, 100 + index * 30, 30)
    assert findings(builder.write(tmp_path / "t.json")) == {}


def test_bottleneck_dict_shape(launch_bound: Path) -> None:
    as_dict = findings(launch_bound)["sync-in-marker"].to_dict()
    assert set(as_dict) == {
        "rule",
        "severity",
        "subject_kind",
        "subject",
        "title",
        "evidence",
        "recommendation",
    }


def test_dominant_kernel_advice_fits_its_class(tmp_path: Path, launch_bound: Path) -> None:
    assert "tensor cores" in findings(launch_bound)["dominant-kernel"].recommendation
    builder = TraceBuilder().marker("load", 0, 100)
    builder.launch("Memcpy HtoD (Pinned -> Device)", 1, 1, 10, 80, category="gpu_memcpy")
    builder.launch("gemm", 2, 1, 90, 10)
    advice = findings(builder.write(tmp_path / "copies.json"))["dominant-kernel"].recommendation
    assert "non_blocking" in advice and "tensor cores" not in advice

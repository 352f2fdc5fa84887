from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from ncompass.traces.filter import filter_trace
from ncompass.traces.reader import TraceReader
from tests.traces.builders import CPU_PID, TraceBuilder, shared_traces


def kept_names(path: Path) -> list[str]:
    return [event["name"] for event in TraceReader(path) if event.get("ph") != "M"]


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    builder = TraceBuilder()
    builder.add(ph="M", name="process_name", pid=CPU_PID, tid=0, args={"name": "python"})
    builder.marker("step", 0, 100)
    builder.cpu_op("aten::linear", 5, 40)  # direct child of step
    builder.cpu_op("aten::addmm", 6, 30)  # nested in aten::linear: not direct
    builder.launch("gemm", 10, 3, 50, 20)
    builder.add(ph="s", id=1, pid=CPU_PID, tid=1, ts=10, cat="ac2g", name="ac2g")
    builder.add(ph="f", id=1, pid=0, tid=7, ts=50, cat="ac2g", name="ac2g", bp="e")
    builder.marker("tiny", 60, 2)
    builder.launch("outside", 200, 3, 210, 4)  # launched outside every marker
    builder.cpu_op("aten::outside", 300, 10)
    builder.add(ph="i", name="instant", pid=CPU_PID, tid=1, ts=5, s="t")
    return builder.write(tmp_path / "in.json")


def test_default_keeps_markers_their_kernels_flows_and_metadata(
    small_trace: Path, tmp_path: Path
) -> None:
    out = filter_trace(small_trace, tmp_path / "out.json")
    events = list(TraceReader(out))
    assert [e["name"] for e in events] == ["process_name", "step", "gemm", "ac2g", "ac2g", "tiny"]


def test_no_kernels_keeps_only_markers(small_trace: Path, tmp_path: Path) -> None:
    out = filter_trace(small_trace, tmp_path / "out.json", include_cuda_kernels=False)
    assert kept_names(out) == ["step", "tiny"]


def test_direct_children_are_kept_but_not_grandchildren(small_trace: Path, tmp_path: Path) -> None:
    out = filter_trace(
        small_trace, tmp_path / "out.json", include_cuda_kernels=False, include_direct_children=True
    )
    assert kept_names(out) == ["step", "aten::linear", "tiny"]


def test_min_duration_drops_short_events(small_trace: Path, tmp_path: Path) -> None:
    out = filter_trace(small_trace, tmp_path / "out.json", min_duration_us=10)
    assert kept_names(out) == ["step", "gemm", "ac2g", "ac2g"]


def test_default_output_sits_next_to_the_input(small_trace: Path, tmp_path: Path) -> None:
    assert filter_trace(small_trace) == tmp_path / "in.filtered.json"
    gz = TraceBuilder().marker("m", 0, 1).write(tmp_path / "x.json.gz")
    assert filter_trace(gz) == tmp_path / "x.filtered.json.gz"
    assert gzip.decompress((tmp_path / "x.filtered.json.gz").read_bytes())


@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_traces_keep_exactly_markers_and_kernels_launched_inside(
    path: Path, tmp_path: Path
) -> None:
    document = json.loads(gzip.decompress(path.read_bytes()))
    events = document["traceEvents"]
    markers = defaultdict(list)
    launches = {}
    for e in events:
        category = str(e.get("cat", "")).lower()
        if e.get("ph") != "X":
            continue
        if category == "user_annotation":
            markers[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        elif "correlation" in e.get("args", {}) and category not in {
            "kernel",
            "gpu_memcpy",
            "gpu_memset",
            "gpu_user_annotation",
            "cuda_sync",
        }:
            launches[e["args"]["correlation"]] = e
    expected = Counter()
    for e in events:
        category = str(e.get("cat", "")).lower()
        if e.get("ph") == "M":
            expected["metadata"] += 1
        elif e.get("ph") != "X":
            continue
        elif category in {"user_annotation", "gpu_user_annotation"}:
            expected[category] += 1
        elif category in {"kernel", "gpu_memcpy", "gpu_memset"}:
            launch = launches.get(e["args"].get("correlation"))
            if launch and any(
                a <= launch["ts"] <= b for a, b in markers[(launch["pid"], launch["tid"])]
            ):
                expected["gpu"] += 1
    out = filter_trace(path, tmp_path / "out.json.gz")
    kept = json.loads(gzip.decompress(out.read_bytes()))  # valid JSON, as Perfetto needs
    actual = Counter()
    for e in kept["traceEvents"]:
        category = str(e.get("cat", "")).lower()
        if e["ph"] == "M":
            actual["metadata"] += 1
        elif e["ph"] == "X":
            actual["gpu" if category in {"kernel", "gpu_memcpy", "gpu_memset"} else category] += 1
        else:
            assert e["ph"] in {"s", "f", "t"} and category in {"ac2g", "async_cpu_to_gpu"}
    assert actual == expected
    assert {k: v for k, v in kept.items() if k != "traceEvents"} == {
        k: v for k, v in document.items() if k != "traceEvents"
    }


def test_empty_trace_filters_to_an_empty_valid_trace(tmp_path: Path) -> None:
    source = tmp_path / "empty.json"
    source.write_text('{"traceEvents": []}')
    out = filter_trace(source, tmp_path / "out.json", include_direct_children=True)
    assert json.loads(out.read_text()) == {"traceEvents": []}

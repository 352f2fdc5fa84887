from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from ncompass.analysis.breakdown import breakdown
from ncompass.errors import TraceError
from tests.traces.builders import TraceBuilder, shared_traces

GPU = {"kernel", "gpu_memcpy", "gpu_memset"}


def several_streams(tmp_path: Path, rank: int | None = None, name: str = "t.json") -> Path:
    builder = TraceBuilder()
    if rank is not None:
        builder.metadata["distributedInfo"] = {"rank": rank}
    builder.launch("gemm_a", -5, 1, 0, 10, stream=7)
    builder.launch("gemm_b", 16, 1, 20, 10, stream=7)  # launched after the GPU went idle at 15
    builder.launch("gemm_c", -4, 1, 5, 10, stream=8)
    builder.launch("ncclKernel_AllReduce", -3, 1, 25, 15, stream=8)
    builder.launch("Memcpy HtoD (Pinned -> Device)", 30, 2, 50, 5, stream=9, category="gpu_memcpy")
    return builder.write(tmp_path / name)


def test_overlapping_kernels_on_several_streams(tmp_path: Path) -> None:
    result = breakdown([several_streams(tmp_path)]).to_dict()
    rank = result["ranks"]["0"]
    # Busy: [0,15] [20,40] [50,55] -> 40 of a 55 µs span; computation: [0,15] [20,30].
    assert rank["kernel_span_us"] == 55.0
    assert rank["idle_us"] == 15.0
    assert rank["compute_us"] == 25.0
    assert rank["non_compute_us"] == 15.0
    assert rank["gpu_events"] == 5
    assert rank["communication_overlapped_us"] == 5.0  # [25, 30]
    assert result["kernel_types"] == {
        "computation_us": 25.0,
        "communication_us": 15.0,
        "memory_us": 5.0,
    }
    gaps = rank["idle_gaps"]
    assert (gaps["count"], gaps["host_bound_count"], gaps["host_bound_us"]) == (2, 1, 5.0)
    assert (gaps["not_host_bound_count"], gaps["not_host_bound_us"]) == (1, 10.0)
    assert gaps["largest"][0]["next_event"].startswith("Memcpy")
    launches = rank["launches"]
    assert launches["linked"] == 5 and launches["unlinked"] == 0
    assert launches["launch_delay_us"]["max"] == 28.0  # the all-reduce: launched at -3, ran at 25
    assert launches["shorter_than_launch"] == 0


def test_ranks_come_from_distributed_info_or_position(tmp_path: Path) -> None:
    with_rank = several_streams(tmp_path, rank=5, name="a.json")
    without = several_streams(tmp_path, name="b.json")
    result = breakdown([with_rank, without]).to_dict()
    assert sorted(result["ranks"]) == ["1", "5"]
    assert result["kernel_types"]["computation_us"] == 50.0  # summed over ranks


def test_two_files_with_one_rank_are_refused(tmp_path: Path) -> None:
    path = several_streams(tmp_path, rank=0)
    with pytest.raises(TraceError, match="both rank 0"):
        breakdown([path, path])


def test_trace_without_gpu_events_breaks_down_to_zero(tmp_path: Path) -> None:
    path = TraceBuilder().marker("m", 0, 10).write(tmp_path / "cpu.json")
    rank = breakdown([path]).to_dict()["ranks"]["0"]
    assert (rank["kernel_span_us"], rank["idle_us"], rank["compute_us"], rank["gpu_events"]) == (
        0,
        0,
        0,
        0,
    )


def test_empty_trace_gives_an_empty_valid_breakdown(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"traceEvents": []}')
    assert breakdown([path]).to_dict()["ranks"]["0"]["kernel_span_us"] == 0.0


def test_last_profiler_step_can_be_left_out(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.marker("ProfilerStep#1", 0, 100).marker("ProfilerStep#2", 100, 100)
    builder.launch("early", 10, 1, 20, 10)
    builder.launch("late", 110, 1, 120, 30)
    builder.gpu("unlaunched", 5, 1)
    path = builder.write(tmp_path / "steps.json")
    assert breakdown([path]).to_dict()["ranks"]["0"]["gpu_events"] == 3
    rank = breakdown([path], exclude_last_profiler_step=True).to_dict()["ranks"]["0"]
    assert (rank["gpu_events"], rank["kernel_span_us"]) == (1, 10.0)


# -- the shared real traces against an independent computation ----------------------------------


def sweep_union_length(intervals: list[tuple[Decimal, Decimal]]) -> Decimal:
    """Union length by counting coverage over sorted boundaries (not by merging intervals)."""
    boundaries = sorted(
        [(s, 1) for s, e in intervals] + [(e, -1) for s, e in intervals],
        key=lambda b: (b[0], -b[1]),
    )
    covered, depth, since = Decimal(0), 0, Decimal(0)
    for time, step in boundaries:
        if depth == 0 and step == 1:
            since = time
        depth += step
        if depth == 0:
            covered += time - since
    return covered


def kind(name: str) -> str:
    if re.match(r"^nccl.*|^hip|^hccl|.*ncclKernel.*", name):
        return "communication"
    if re.match(r"^(hip)?Memcpy|^(hip)?Memset|^dma", name):
        return "memory"
    return "computation"


def independent_breakdown(path: Path, exclude_last_step: bool) -> dict[str, float]:
    """The contract's definitions (docs/architecture.md) in exact decimal arithmetic on the numbers as written."""
    events = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and str(e.get("cat")).lower() in GPU]
    if exclude_last_step:
        steps = [
            e["ts"]
            for e in events
            if e.get("cat") == "user_annotation" and re.match(r"ProfilerStep#\d+$", e["name"])
        ]
        if len(steps) >= 2:
            launch_ts = {
                e["args"]["correlation"]: e["ts"]
                for e in events
                if e.get("ph") == "X"
                and str(e.get("cat")).lower() not in GPU | {"gpu_user_annotation", "cuda_sync"}
                and "correlation" in e.get("args", {})
            }
            gpu = [
                e
                for e in gpu
                if launch_ts.get(e["args"].get("correlation"), float("inf")) < max(steps)
            ]
    if not gpu:
        return {"kernel_span_us": 0.0, "idle_us": 0.0, "compute_us": 0.0, "gpu_events": 0}
    intervals = [(Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"])) for e in gpu]
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    busy = sweep_union_length(intervals)
    compute = sweep_union_length(
        [i for i, e in zip(intervals, gpu, strict=True) if kind(e["name"]) == "computation"]
    )
    return {
        "kernel_span_us": float(span),
        "idle_us": float(span - busy),
        "compute_us": float(compute),
        "gpu_events": len(gpu),
    }


@pytest.mark.parametrize("exclude_last_step", [False, True])
@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_traces_match_an_independent_computation(
    path: Path, exclude_last_step: bool
) -> None:
    expected = independent_breakdown(path, exclude_last_step)
    rank = next(
        iter(
            breakdown([path], exclude_last_profiler_step=exclude_last_step)
            .to_dict()["ranks"]
            .values()
        )
    )
    # Timestamps like 1712195495505543.2 lose ~0.1 µs when parsed as doubles, but differences of
    # nearby doubles are exact, so totals stay within a few ns per event of the exact answer.
    tolerance = 1e-9 * max(expected["kernel_span_us"], 1.0) + 1e-3 * expected["gpu_events"]
    assert rank["gpu_events"] == expected["gpu_events"]
    for key in ("kernel_span_us", "idle_us", "compute_us"):
        assert rank[key] == pytest.approx(expected[key], abs=tolerance), key
    assert rank["non_compute_us"] == pytest.approx(
        expected["kernel_span_us"] - expected["idle_us"] - expected["compute_us"], abs=tolerance
    )

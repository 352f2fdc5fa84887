from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from ncompass.analysis.markers import is_synchronization, marker_stats
from ncompass.traces.link import link_trace
from tests.traces.builders import CPU_PID, TraceBuilder, shared_traces

GPU = {"kernel", "gpu_memcpy", "gpu_memset"}
GPU_SIDE = GPU | {"gpu_user_annotation", "cuda_sync"}


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    builder = TraceBuilder()
    builder.marker("step", 0, 100).marker("fwd", 10, 40).marker("fwd", 60, 20)
    builder.launch("k1", 20, 1, 200, 5)
    builder.runtime("cudaDeviceSynchronize", 30, 8)
    builder.launch("k2", 65, 1, 210, 7)
    builder.launch("k3", 90, 1, 220, 3)
    builder.marker("fwd", 0, 30, tid=2)
    builder.launch("k4", 5, 1, 230, 11, tid=2)
    builder.marker("ProfilerStep#1", 0, 300, tid=3).marker("ProfilerStep#2", 300, 100, tid=3)
    return builder.write(tmp_path / "nested.json")


def test_nested_markers_on_several_threads(nested: Path) -> None:
    stats = {name: s.to_dict() for name, s in marker_stats(nested).items()}
    step, fwd = stats["step"], stats["fwd"]
    assert (step["calls"], step["cpu_total_us"], step["cpu_self_us"]) == (1, 100.0, 40.0)
    assert (step["gpu_total_us"], step["gpu_self_us"], step["gpu_events"]) == (15.0, 3.0, 3)
    assert (step["launches"], step["sync_calls"], step["sync_us"], step["threads"]) == (
        4,
        1,
        8.0,
        1,
    )
    assert (fwd["calls"], fwd["cpu_total_us"], fwd["cpu_self_us"]) == (3, 90.0, 90.0)
    assert (fwd["cpu_min_us"], fwd["cpu_max_us"], fwd["cpu_mean_us"]) == (20.0, 40.0, 30.0)
    assert (fwd["gpu_total_us"], fwd["gpu_self_us"], fwd["gpu_events"]) == (23.0, 23.0, 3)
    assert (fwd["sync_calls"], fwd["threads"]) == (1, 2)


def test_ranges_that_overlap_without_nesting_each_count_the_launches_inside(
    tmp_path: Path,
) -> None:
    # Start/end ranges of interleaved async tasks on one thread: "a" [0, 50], "b" [30, 80].
    builder = TraceBuilder().marker("a", 0, 50).marker("b", 30, 50)
    builder.launch("in_a", 10, 1, 100, 4)
    builder.launch("in_both", 40, 1, 110, 6)
    builder.runtime("cudaStreamSynchronize", 42, 3)
    builder.launch("in_b", 60, 1, 120, 8)
    stats = marker_stats(builder.write(tmp_path / "t.json"))
    a, b = stats["a"], stats["b"]
    assert (a.gpu_total_us, a.gpu_events, a.launches, a.sync_calls) == (10, 2, 3, 1)
    assert (b.gpu_total_us, b.gpu_events, b.launches, b.sync_calls) == (14, 2, 3, 1)
    assert (a.gpu_self_us, b.gpu_self_us) == (4, 14)  # the later range is the innermost
    assert (a.cpu_self_us, b.cpu_self_us) == (50, 50)  # neither is nested in the other


def test_slices_moved_to_an_overlap_track_count_on_their_thread(tmp_path: Path) -> None:
    # What the converters write when slices overlap without nesting: the later one goes to a
    # track of its own whose thread_name names the thread it belongs to.
    builder = TraceBuilder().marker("a", 0, 50).marker("b", 30, 50, tid=99)
    builder.add(
        ph="M",
        name="thread_name",
        pid=CPU_PID,
        tid=99,
        args={"name": "python · overlap 1", "overlap_of_tid": 1},
    )
    builder.launch("in_both", 40, 1, 110, 6)
    stats = marker_stats(builder.write(tmp_path / "t.json"))
    assert (stats["a"].gpu_total_us, stats["b"].gpu_total_us) == (6, 6)
    assert stats["b"].threads == 1


def test_profiler_steps_are_one_marker_and_order_is_by_cpu_time(nested: Path) -> None:
    stats = marker_stats(nested)
    assert list(stats) == ["ProfilerStep#*", "step", "fwd"]
    assert stats["ProfilerStep#*"].calls == 2


def test_stats_accept_a_linked_trace(nested: Path) -> None:
    assert marker_stats(link_trace(nested)).keys() == marker_stats(nested).keys()


def test_synchronizing_calls_are_recognised() -> None:
    assert is_synchronization("cudaDeviceSynchronize")
    assert is_synchronization("cudaStreamSynchronize")
    assert is_synchronization("hipEventSynchronize")
    assert not is_synchronization("cudaLaunchKernel")


def test_real_torch_trace_markers(torch_trace: Path) -> None:
    events = json.loads(torch_trace.read_text())["traceEvents"]
    ranges = [e for e in events if e.get("cat") == "user_annotation"]
    forwards = [e for e in ranges if e["name"] == "model.forward"]
    expected_self = sum(
        f["dur"]
        - sum(
            e["dur"]
            for e in ranges
            if e["name"] != "model.forward"
            and f["ts"] <= e["ts"]
            and e["ts"] + e["dur"] <= f["ts"] + f["dur"]
        )
        for f in forwards
    )
    stats = marker_stats(torch_trace)
    assert {name: s.calls for name, s in stats.items()} == {
        "model.forward": 3,
        "model.linear": 3,
        "model.activation": 3,
    }
    forward = stats["model.forward"]
    assert forward.cpu_total_us == pytest.approx(sum(f["dur"] for f in forwards))
    assert forward.cpu_self_us == pytest.approx(expected_self)
    assert forward.gpu_total_us == 0.0


@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_traces_marker_totals_match_a_brute_force_count(path: Path) -> None:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    markers = [e for e in complete if str(e.get("cat")).lower() == "user_annotation"]
    launches = {
        e["args"]["correlation"]: e
        for e in complete
        if str(e.get("cat")).lower() not in GPU_SIDE and "correlation" in e.get("args", {})
    }
    kernels = [e for e in complete if str(e.get("cat")).lower() in GPU]
    expected: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for marker in markers:
        name = re.sub(r"^ProfilerStep#\d+$", "ProfilerStep#*", marker["name"])
        entry = expected[name]
        entry[0] += 1
        entry[1] += marker["dur"]
        for kernel in kernels:
            launch = launches.get(kernel["args"].get("correlation"))
            if (
                launch is not None
                and (launch["pid"], launch["tid"]) == (marker["pid"], marker["tid"])
                and marker["ts"] <= launch["ts"] <= marker["ts"] + marker["dur"]
            ):
                entry[2] += kernel["dur"]
    actual = marker_stats(path)
    assert set(actual) == set(expected)
    for name, (calls, cpu_total, gpu_total) in expected.items():
        assert actual[name].calls == calls
        assert actual[name].cpu_total_us == pytest.approx(cpu_total, rel=1e-12)
        assert actual[name].gpu_total_us == pytest.approx(gpu_total, rel=1e-9, abs=1e-6)


def _compiled_trace(tmp_path: Path) -> Path:
    """A GPU run of compiled code: one marker recorded around the compiled call, the markers
    inside it known only from the kernels' ``args.ncompass_markers``."""
    builder = TraceBuilder()
    builder.marker("step", 0, 100)
    builder.cpu_op("Torch-Compiled Region: 0/0", 5, 90)
    inner = ["attn.scores", "attn"]
    for start in (10, 50):
        # Inductor records a CPU range per Triton launch; the GPU event holds the kernel's time
        builder.cpu_op("triton_poi_fused_softmax_0", start, 4)
        builder.events[-1]["args"]["ncompass_markers"] = inner
        builder.launch("triton_poi_fused_softmax_0", start + 1, 2, 200 + start, 7)
        builder.events[-1]["args"]["ncompass_markers"] = inner
        builder.launch("triton_red_fused_sum_1", start + 10, 2, 220 + start, 3)
        builder.events[-1]["args"]["ncompass_markers"] = ["attn"]
    builder.cpu_op("graph_1_cpp_fused_relu_0", 96, 2)
    builder.events[-1]["args"]["ncompass_markers"] = ["step"]
    return builder.write(tmp_path / "compiled.json")


def test_compiled_kernels_are_listed_under_their_markers(tmp_path: Path) -> None:
    from ncompass.analysis.markers import compiled_kernel_stats

    kernels = {
        marker: [(k.name, k.calls, k.total_us) for k in listed]
        for marker, listed in compiled_kernel_stats(_compiled_trace(tmp_path)).items()
    }
    assert kernels == {  # GPU time when the kernel ran on the GPU, else its CPU time
        "attn.scores": [("triton_poi_fused_softmax_0", 2, 14.0)],
        "attn": [("triton_poi_fused_softmax_0", 2, 14.0), ("triton_red_fused_sum_1", 2, 6.0)],
        "step": [("graph_1_cpp_fused_relu_0", 1, 2.0)],
    }


def test_summary_gives_compiled_markers_an_entry_even_without_a_range(tmp_path: Path) -> None:
    from ncompass.analysis.summary import summarize_trace

    summary = summarize_trace(_compiled_trace(tmp_path))
    markers = {marker["name"]: marker for marker in summary["structured"]["markers"]}
    assert markers["step"]["calls"] == 1
    assert [k["name"] for k in markers["step"]["compiled_kernels"]] == ["graph_1_cpp_fused_relu_0"]
    assert markers["attn"]["calls"] == 0
    assert len(markers["attn"]["compiled_kernels"]) == 2
    assert "- `attn`: compiled: its time is in 2 Inductor kernels (20.0 µs)" in summary["markdown"]
    assert "  - `triton_red_fused_sum_1`: 2 calls, 6.0 µs" in summary["markdown"]


def test_a_trace_without_compiled_code_lists_no_compiled_kernels(nested: Path) -> None:
    from ncompass.analysis.markers import may_hold_compiled_kernels
    from ncompass.analysis.summary import summarize_trace

    assert not may_hold_compiled_kernels(link_trace(nested))
    summary = summarize_trace(nested)
    assert all(marker["compiled_kernels"] == [] for marker in summary["structured"]["markers"])
    assert "## Compiled code" not in summary["markdown"]

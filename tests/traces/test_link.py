from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from ncompass.traces.link import NO_LINK, link_trace, marker_group
from tests.traces.builders import CPU_PID, TraceBuilder, shared_traces


def marker_names_of_gpu_events(path: Path) -> dict[str, str | None]:
    trace = link_trace(path)
    result: dict[str, str | None] = {}
    for index in range(len(trace.gpu)):
        owner = trace.marker_of_gpu_event(index)
        result[trace.names[trace.gpu.name[index]]] = (
            None if owner == NO_LINK else trace.markers[owner].name
        )
    return result


def test_launches_go_to_the_innermost_marker_on_their_thread(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.marker("outer", 0, 100, tid=1).marker("inner", 10, 20, tid=1)
    builder.marker("other-thread", 0, 100, tid=2)
    builder.launch("k_inner", 15, 2, 40, 5, tid=1)
    builder.launch("k_outer", 50, 2, 60, 5, tid=1)
    builder.launch("k_thread2", 12, 2, 70, 5, tid=2)
    builder.launch("k_no_marker", 150, 2, 160, 5, tid=1)
    builder.gpu("k_no_launch", 200, 5)
    names = marker_names_of_gpu_events(builder.write(tmp_path / "t.json"))
    assert names == {
        "k_inner": "inner",
        "k_outer": "outer",
        "k_thread2": "other-thread",
        "k_no_marker": None,
        "k_no_launch": None,
    }


def test_linking_uses_correlation_not_file_order_or_flows(tmp_path: Path) -> None:
    builder = TraceBuilder()
    # GPU events first, launches later, a flow end without its start, capitalised categories.
    builder.gpu("k", 50, 5, correlation=9, category="Kernel")
    builder.add(ph="f", id=9, pid=CPU_PID, tid=1, ts=1, cat="ac2g", name="ac2g", bp="e")
    builder.add(
        ph="X",
        cat="Runtime",
        name="cudaLaunchKernel",
        pid=CPU_PID,
        tid=1,
        ts=5,
        dur=1,
        args={"correlation": 9},
    )
    builder.add(ph="s", id=9, pid=CPU_PID, tid=1, ts=5, cat="async_cpu_to_gpu", name="launch")
    builder.marker("m", 0, 10)
    trace = link_trace(builder.write(tmp_path / "t.json"))
    assert trace.gpu.launch[0] == 0
    assert trace.markers[trace.marker_of_gpu_event(0)].name == "m"
    assert trace.event_counts == {"X": 3, "f": 1, "s": 1}


def test_begin_end_markers_become_ranges(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.add(ph="B", cat="user_annotation", name="phase", pid=CPU_PID, tid=1, ts=0)
    builder.launch("k", 3, 1, 10, 2)
    builder.add(ph="E", pid=CPU_PID, tid=1, ts=8)
    builder.add(ph="E", pid=CPU_PID, tid=1, ts=9)  # an E without B is ignored
    builder.add(ph="B", cat="user_annotation", name="open", pid=CPU_PID, tid=1, ts=20)
    builder.cpu_op("late", 30, 5)
    trace = link_trace(builder.write(tmp_path / "t.json"))
    spans = {m.name: (trace.origin_us + m.start, trace.origin_us + m.end) for m in trace.markers}
    assert spans == {"phase": (0.0, 8.0), "open": (20.0, 35.0)}  # open runs to the trace end
    assert trace.markers[trace.marker_of_gpu_event(0)].name == "phase"


def test_nested_markers_know_their_parent_and_nested_time(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.marker("a", 0, 100).marker("b", 10, 30).marker("c", 15, 5).marker("d", 50, 20)
    builder.marker("a2", 0, 100, tid=2)
    trace = link_trace(builder.write(tmp_path / "t.json"))
    by_name = {m.name: m for m in trace.markers}
    parent = {
        m.name: (None if m.parent == NO_LINK else trace.markers[m.parent].name)
        for m in trace.markers
    }
    assert parent == {"a": None, "b": "a", "c": "b", "d": "a", "a2": None}
    assert by_name["a"].nested_us == 50.0
    assert by_name["b"].nested_us == 5.0


def test_ns_resolution_timestamps_keep_their_fractions(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.marker("m", 1712195495505543.2, 1.5)
    builder.launch("k", 1712195495505543.5, 0.25, 1712195495505600.125, 0.875)
    trace = link_trace(builder.write(tmp_path / "t.json"))
    assert trace.gpu.duration[0] == 0.875
    assert trace.markers[trace.marker_of_gpu_event(0)].name == "m"


def test_cpu_operators_are_totalled_per_name(tmp_path: Path) -> None:
    builder = (
        TraceBuilder().cpu_op("aten::mm", 0, 5).cpu_op("aten::mm", 10, 7).cpu_op("aten::add", 20, 1)
    )
    trace = link_trace(builder.write(tmp_path / "t.json"))
    totals = {name: (t.calls, t.total_us, t.max_us) for name, t in trace.cpu_operators.items()}
    assert totals == {"aten::mm": (2, 12.0, 7.0), "aten::add": (1, 1.0, 1.0)}


def test_rank_comes_from_distributed_info(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.metadata["distributedInfo"] = {"rank": 3}
    assert link_trace(builder.write(tmp_path / "t.json")).rank == 3
    assert link_trace(TraceBuilder().write(tmp_path / "u.json")).rank is None


def test_profiler_steps_are_grouped() -> None:
    assert marker_group("ProfilerStep#12") == "ProfilerStep#*"
    assert marker_group("ProfilerStep#x") == "ProfilerStep#x"


@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_traces_link_like_a_brute_force_search(path: Path) -> None:
    """Innermost enclosing marker by exhaustive search (smallest enclosing range wins)."""
    document = json.loads(gzip.decompress(path.read_bytes()))
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    gpu_categories = {"kernel", "gpu_memcpy", "gpu_memset"}
    side = {"gpu_user_annotation", "cuda_sync"}
    markers = defaultdict(list)
    launches = {}
    for e in events:
        category = str(e.get("cat", "")).lower()
        if category == "user_annotation":
            markers[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif category not in gpu_categories | side and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e
    expected: dict[str, float] = defaultdict(float)
    for e in events:
        if str(e.get("cat", "")).lower() not in gpu_categories:
            continue
        launch = launches.get(e["args"].get("correlation"))
        if launch is None:
            continue
        enclosing = [
            m for m in markers[(launch["pid"], launch["tid"])] if m[0] <= launch["ts"] <= m[1]
        ]
        if enclosing:
            innermost = min(enclosing, key=lambda m: m[1] - m[0])
            expected[innermost[2]] += e["dur"]
    trace = link_trace(path)
    actual: dict[str, float] = defaultdict(float)
    for index in range(len(trace.gpu)):
        owner = trace.marker_of_gpu_event(index)
        if owner != NO_LINK:
            actual[trace.markers[owner].name] += trace.gpu.duration[index]
    assert set(actual) == set(expected)
    for name, value in expected.items():
        assert actual[name] == pytest.approx(value, rel=1e-9)


def test_instants_counters_and_flow_steps_are_counted_not_analysed(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("m", 0, 10)
    builder.add(ph="i", name="mark", pid=CPU_PID, tid=1, ts=1, s="t")
    builder.add(ph="I", name="old-style instant", pid=CPU_PID, tid=1, ts=2)
    builder.add(ph="C", name="memory", pid=CPU_PID, ts=3, args={"bytes": 10})
    builder.add(ph="t", id=4, pid=CPU_PID, tid=1, ts=4, cat="ac2g", name="ac2g")
    builder.add(ph="X", cat="cpu_op", name="int-times", pid=CPU_PID, tid=1, ts=5, dur=2)
    builder.add(ph="X", cat="cpu_op", name="quoted", pid=CPU_PID, tid=1, ts="6.5", dur="1.5")
    trace = link_trace(builder.write(tmp_path / "t.json"))
    assert trace.event_counts == {"X": 3, "i": 1, "I": 1, "C": 1, "t": 1}
    assert [m.name for m in trace.markers] == ["m"]
    assert trace.cpu_operators["quoted"].total_us == 1.5
    assert trace.cpu_end - trace.cpu_start == 10.0

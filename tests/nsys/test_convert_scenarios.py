"""``convert_report`` on an export holding a known scenario: every link checked by hand.

The scenario (times in ns; ``cN`` are CUDA API calls, each launching the GPU work listed):

process 100 ``trainer``, thread 100 (main, ``python``):
  push ``step`` [1000, 10000] (domain ``ncompass``)
    push ``forward`` [2000, 6000] (domain ``ncompass``, registered string, colour, payload)
      c1 [2100, 2300] → kernel gemm, GPU 0 stream 7, [3000, 4000]
      c2 [5000, 5200] → kernel relu, GPU 0 stream 7, [5500, 5800]
      c3 [5300, 5400] → kernel bias, GPU 0 stream 7, [5700, 5900]   (overlaps relu: lane 1)
      c4 [5600, 5650] → ncclKernel_AllReduce, GPU 1 stream 20, [5700, 5950]
    mark ``checkpoint`` at 6500
    c5 [7000, 7100] → memcpy 4096 B, GPU 0 stream 7, [7500, 8500]
    OS call pthread_mutex_lock [9100, 9200]
  c6 [11000, 11100] → kernel tail [11500, 12000]            (outside any range)
  start/end ``request`` from 1500 on thread 100 to 9500 on thread 102 (crosses threads)
thread 102 (``loader``, named ``data-loader`` through NVTX):
  push ``loader`` [2000, 9000]                                (same time as ``forward``)
    c7 [2100, 2300] → kernel load, GPU 0 stream 13, [4000, 4500]   (same time as c1)
    start/end ``io`` [8500, 9800]                             (overlaps ``loader``: lane 1)
      c8 [8600, 8700] → kernel io_kernel, stream 13, [8800, 8900]
  push ``never_popped`` from 9840, never popped
    c9 [9850, 9860] → memset 256 B, stream 13, [9870, 9880]
kernel ``orphan`` [12500, 12600] on stream 7 with no launch in the report
process 200 ``rank1``, thread 200: push ``rank1.step`` [1000, 5000]
  its c1 (correlation id 1 again, CUPTI numbers per process) [1100, 1200]
  → kernel gemm on GPU 1 stream 7, [2000, 3000]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ncompass.analysis import marker_stats, summarize_trace
from ncompass.traces.nsys import ConversionResult, convert_report
from tests.nsys.report_builder import ReportBuilder
from tests.nsys.trace_checks import (
    Event,
    assert_viewer_nesting,
    complete_events,
    load_trace,
    only,
    process_names,
    track_names,
)

MAIN, LOADER, RANK1 = 100, 102, 200
SESSION_START = 1_700_000_000_123_456_789
END_OF_REPORT = 12_600


def build_scenario(path: Path) -> Path:
    b = ReportBuilder(path, session_start_ns=SESSION_START)
    b.process(MAIN, "trainer")
    b.process(RANK1, "rank1")
    b.thread(MAIN, MAIN, "python")
    b.thread(MAIN, LOADER, "pt_loader")
    b.nvtx_thread_name(MAIN, LOADER, "data-loader")
    b.thread(RANK1, RANK1, "python")
    b.gpu(0, "NVIDIA H100 80GB HBM3")
    b.gpu(1, "NVIDIA H100 80GB HBM3")
    b.domain(MAIN, MAIN, 1, "ncompass")
    b.category(MAIN, MAIN, 1, 3, "model")

    b.push_pop(MAIN, MAIN, 1000, 10000, "step", domain_id=1)
    b.push_pop(
        MAIN,
        MAIN,
        2000,
        6000,
        "forward",
        domain_id=1,
        registered=True,
        color=0xFF76B900,
        category=3,
        int64Value=42,
    )
    b.kernel(MAIN, b.call(MAIN, MAIN, 2100, 2300), 3000, 4000, "gemm")
    b.kernel(MAIN, b.call(MAIN, MAIN, 5000, 5200), 5500, 5800, "relu")
    b.kernel(MAIN, b.call(MAIN, MAIN, 5300, 5400), 5700, 5900, "bias")
    b.kernel(
        MAIN,
        b.call(MAIN, MAIN, 5600, 5650),
        5700,
        5950,
        "ncclKernel_AllReduce",
        device=1,
        stream=20,
    )
    b.mark(MAIN, MAIN, 6500, "checkpoint", domain_id=1)
    copy = b.call(MAIN, MAIN, 7000, 7100, "cudaMemcpyAsync_v3020")
    b.memcpy(MAIN, copy, 7500, 8500, 4096)
    b.os_call(MAIN, MAIN, 9100, 9200, "pthread_mutex_lock")
    b.kernel(MAIN, b.call(MAIN, MAIN, 11000, 11100), 11500, 12000, "tail")
    b.start_end(MAIN, MAIN, 1500, 9500, "request", end_tid=LOADER, range_id=7)

    b.push_pop(MAIN, LOADER, 2000, 9000, "loader")
    b.kernel(MAIN, b.call(MAIN, LOADER, 2100, 2300), 4000, 4500, "load", stream=13)
    b.start_end(MAIN, LOADER, 8500, 9800, "io", range_id=8)
    b.kernel(MAIN, b.call(MAIN, LOADER, 8600, 8700), 8800, 8900, "io_kernel", stream=13)
    b.push_pop(MAIN, LOADER, 9840, None, "never_popped")
    clear = b.call(MAIN, LOADER, 9850, 9860, "cudaMemsetAsync_v3020")
    b.memset(MAIN, clear, 9870, 9880, 256, stream=13)
    b.kernel(MAIN, None, 12500, 12600, "orphan")

    b.push_pop(RANK1, RANK1, 1000, 5000, "rank1.step")
    b.kernel(RANK1, b.call(RANK1, RANK1, 1100, 1200), 2000, 3000, "gemm", device=1)
    return b.close()


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> ConversionResult:
    folder = tmp_path_factory.mktemp("scenario")
    report = build_scenario(folder / "scenario.sqlite")
    return convert_report(report, folder / "scenario.json.gz")


@pytest.fixture(scope="module")
def events(converted: ConversionResult) -> list[Event]:
    trace_events: list[Event] = load_trace(converted.output)["traceEvents"]
    return trace_events


def _gpu_op(events: list[Event], short_name: str, pid_name: str | None = None) -> Event:
    names = process_names(events)
    found = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") in {"kernel", "gpu_memcpy", "gpu_memset"}
        and (e["args"].get("short name") == short_name or e["name"] == short_name)
        and (pid_name is None or pid_name in names[e["pid"]])
    ]
    assert len(found) == 1, f"{len(found)} GPU operations named {short_name!r}"
    return found[0]


def _range(events: list[Event], name: str) -> Event:
    return only(events, name, "user_annotation")


# ----------------------------------------------------------------------------- linking


def test_each_gpu_operation_is_linked_to_the_ranges_around_its_launch_on_its_own_thread(
    events: list[Event],
) -> None:
    expected = {
        "gemm": ("forward", ["step", "forward"]),
        "relu": ("forward", ["step", "forward"]),
        "bias": ("forward", ["step", "forward"]),
        "ncclKernel_AllReduce": ("forward", ["step", "forward"]),
        "Memcpy HtoD (Pageable -> Device)": ("step", ["step"]),
        # launched by the loader thread while `forward` and `step` were open on the main one
        "load": ("loader", ["loader"]),
        # inside both `loader` and the overlapping start/end range `io`, which started later
        "io_kernel": ("io", ["loader", "io"]),
        "Memset (Device)": ("never_popped", ["never_popped"]),
    }
    for name, (innermost, path) in expected.items():
        op = _gpu_op(events, name, "GPU 0" if name != "ncclKernel_AllReduce" else "GPU 1")
        assert op["args"]["nvtx_range"] == innermost, name
        assert op["args"]["nvtx_path"] == path, name
    for unranged in ("tail", "orphan"):
        assert "nvtx_range" not in _gpu_op(events, unranged)["args"]
    rank1_gemm = _gpu_op(events, "gemm", "process 200")
    assert rank1_gemm["args"]["nvtx_range"] == "rank1.step"


def test_each_range_counts_the_gpu_work_launched_inside_it(events: list[Event]) -> None:
    expected = {
        # name: (launches, GPU ops, summed GPU µs, first GPU start µs, GPU span µs)
        "step": (5, 5, 2.75, 3.0, 5.5),
        "forward": (4, 4, 1.75, 3.0, 2.95),
        "loader": (2, 2, 0.6, 4.0, 4.9),
        "io": (1, 1, 0.1, 8.8, 0.1),
        "never_popped": (1, 1, 0.01, 9.87, 0.01),
        "rank1.step": (1, 1, 1.0, 2.0, 1.0),
    }
    for name, (launches, ops, gpu_us, start_us, span_us) in expected.items():
        args = _range(events, name)["args"]
        assert args["launches"] == launches, name
        assert args["gpu_ops"] == ops, name
        assert args["gpu_time_us"] == pytest.approx(gpu_us), name
        assert args["gpu_start_us"] == pytest.approx(start_us), name
        assert args["gpu_span_us"] == pytest.approx(span_us), name


def test_ranges_are_projected_onto_every_stream_their_work_ran_on(events: list[Event]) -> None:
    names = track_names(events)
    projections: dict[tuple[str, str], tuple[float, ...]] = {}
    for event in complete_events(events, "gpu_user_annotation"):
        track = names[(event["pid"], event["tid"])].split(" · overlap")[0]
        gpu = process_names(events)[event["pid"]]
        key = (event["name"], f"{gpu.split(' (')[0]} {track}")
        assert key not in projections
        args = event["args"]
        values = (event["ts"], event["dur"], args["gpu_ops"], args["gpu_time_us"])
        projections[key] = tuple(round(value, 6) for value in values)
    assert projections == (
        {
            ("step", "GPU 0 stream 7 · NVTX"): (3.0, 5.5, 4, 2.5),
            ("step", "GPU 1 stream 20 · NVTX"): (5.7, 0.25, 1, 0.25),
            ("forward", "GPU 0 stream 7 · NVTX"): (3.0, 2.9, 3, 1.5),
            ("forward", "GPU 1 stream 20 · NVTX"): (5.7, 0.25, 1, 0.25),
            ("loader", "GPU 0 stream 13 · NVTX"): (4.0, 4.9, 2, 0.6),
            ("io", "GPU 0 stream 13 · NVTX"): (8.8, 0.1, 1, 0.1),
            ("never_popped", "GPU 0 stream 13 · NVTX"): (9.87, 0.01, 1, 0.01),
            ("rank1.step", "GPU 1 stream 7 · NVTX"): (2.0, 1.0, 1, 1.0),
        }
    )


def test_launch_arrows_and_correlations_are_unique_across_processes(events: list[Event]) -> None:
    calls = complete_events(events, "cuda_runtime")
    assert len(calls) == 10
    correlations = [call["args"]["correlation"] for call in calls]
    assert len(set(correlations)) == len(correlations)
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f"}
    assert set(starts) == set(ends) == set(correlations)
    for op in [e for e in events if e.get("cat") in {"kernel", "gpu_memcpy", "gpu_memset"}]:
        correlation = op["args"].get("correlation")
        if op["name"].startswith("void orphan"):
            assert correlation is None
            continue
        call = next(c for c in calls if c["args"]["correlation"] == correlation)
        head, tail = ends[correlation], starts[correlation]
        assert (head["pid"], head["tid"], head["ts"]) == (op["pid"], op["tid"], op["ts"])
        assert (tail["pid"], tail["tid"], tail["ts"]) == (call["pid"], call["tid"], call["ts"])
        assert head["bp"] == "e" and head["cat"] == tail["cat"] == "ac2g"
    rank1_call = next(c for c in calls if c["pid"] == RANK1)
    assert rank1_call["args"]["correlation"] == (1 << 32) | 1
    first_main_call = min((c for c in calls if c["pid"] == MAIN), key=lambda c: c["ts"])
    assert first_main_call["args"]["correlation"] == 1  # the first process keeps its ids


def test_a_start_end_range_that_crosses_threads_is_shown_but_credited_nothing(
    events: list[Event],
) -> None:
    pair = [e for e in events if e.get("cat") == "nvtx_async"]
    begin = next(e for e in pair if e["ph"] == "b")
    end = next(e for e in pair if e["ph"] == "e")
    assert begin["name"] == end["name"] == "request"
    assert begin["id"] == end["id"]
    assert (begin["pid"], begin["tid"], begin["ts"]) == (MAIN, MAIN, 1.5)
    assert (end["pid"], end["tid"], end["ts"]) == (MAIN, LOADER, 9.5)
    assert begin["args"]["end_tid"] == LOADER
    assert not [e for e in events if e.get("ph") == "X" and e["name"] == "request"]
    assert all(
        "request" not in (e["args"].get("nvtx_path") or [])
        for e in events
        if e.get("cat") == "kernel"
    )


# ----------------------------------------------------------------------------- layout


def test_overlapping_slices_go_to_extra_tracks_and_every_track_nests(
    events: list[Event], converted: ConversionResult
) -> None:
    assert_viewer_nesting(events)
    names = track_names(events)
    relu, bias = _gpu_op(events, "relu"), _gpu_op(events, "bias")
    assert names[(relu["pid"], relu["tid"])] == "stream 7"
    assert names[(bias["pid"], bias["tid"])] == "stream 7 · overlap 1"
    loader, io = _range(events, "loader"), _range(events, "io")
    assert names[(MAIN, loader["tid"])] == "data-loader"
    assert loader["tid"] == LOADER
    assert names[(MAIN, io["tid"])] == "data-loader · overlap 1"
    sort = {
        (e["pid"], e["tid"]): e["args"]["sort_index"]
        for e in events
        if e.get("name") == "thread_sort_index"
    }
    assert sort[(MAIN, io["tid"])] == sort[(MAIN, LOADER)] + 1
    assert converted.stats.overlap_lanes == 2
    # every GPU operation of the report is in the trace, each once
    stats = converted.stats
    assert (stats.kernels, stats.memcpys, stats.memsets) == (9, 1, 1)
    assert len([e for e in events if e.get("cat") == "kernel"]) == 9


# ----------------------------------------------------------------------------- content


def test_nvtx_attributes_marks_and_os_calls(events: list[Event]) -> None:
    forward = _range(events, "forward")
    assert forward["args"]["domain"] == "ncompass"
    assert forward["args"]["nvtx_kind"] == "push_pop"
    assert forward["args"]["color"] == "#76b900"
    assert forward["args"]["category"] == 3
    assert forward["args"]["category_name"] == "model"
    assert forward["args"]["payload"] == 42
    assert (forward["pid"], forward["tid"], forward["ts"], forward["dur"]) == (MAIN, MAIN, 2.0, 4.0)
    assert _range(events, "loader")["args"]["domain"] == "default"
    assert _range(events, "io")["args"]["nvtx_kind"] == "start_end"
    mark = next(e for e in events if e.get("ph") == "i")
    assert (mark["name"], mark["tid"], mark["ts"], mark["s"]) == ("checkpoint", MAIN, 6.5, "t")
    assert mark["args"]["domain"] == "ncompass"
    lock = only(events, "pthread_mutex_lock", "os_runtime")
    assert (lock["tid"], lock["ts"], lock["dur"]) == (MAIN, 9.1, pytest.approx(0.1))
    copy = _gpu_op(events, "Memcpy HtoD (Pageable -> Device)")
    assert copy["args"]["bytes"] == 4096
    call_names = {e["name"] for e in complete_events(events, "cuda_runtime")}
    assert call_names == {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"}


def test_unclosed_range_runs_to_the_end_of_the_report(events: list[Event]) -> None:
    never = _range(events, "never_popped")
    assert never["args"]["unclosed"] is True
    assert never["ts"] + never["dur"] == pytest.approx(END_OF_REPORT / 1000)


def test_processes_threads_and_gpus_are_named(events: list[Event]) -> None:
    processes = process_names(events)
    assert processes[MAIN] == "trainer"
    assert processes[RANK1] == "rank1"
    gpus = sorted(name for pid, name in processes.items() if pid not in {MAIN, RANK1})
    assert gpus == [
        "GPU 0 (NVIDIA H100 80GB HBM3), process 100",
        "GPU 1 (NVIDIA H100 80GB HBM3), process 100",
        "GPU 1 (NVIDIA H100 80GB HBM3), process 200",
    ]
    threads = track_names(events)
    assert threads[(MAIN, MAIN)] == "python"
    assert threads[(MAIN, LOADER)] == "data-loader"  # the NVTX name wins over the OS name


def test_trace_metadata(converted: ConversionResult) -> None:
    document = load_trace(converted.output)
    assert document["baseTimeNanoseconds"] == SESSION_START
    assert [d["id"] for d in document["deviceProperties"]] == [0, 1]
    assert document["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert document["otherData"]["nsys_version"] == "2024.6.2.225"
    assert converted.describe().startswith("9 kernels, 1 memcpy, 1 memset; 10 CUDA API calls")
    assert "9 of 11 GPU operations launched inside NVTX ranges" in converted.describe()


# ----------------------------------------------------------------------------- analysis


def test_summary_reports_gpu_time_per_nvtx_range(converted: ConversionResult) -> None:
    stats = marker_stats(converted.output)
    assert stats["step"].gpu_total_us == pytest.approx(2.75)
    assert stats["forward"].gpu_total_us == pytest.approx(1.75)
    assert stats["forward"].gpu_events == 4
    assert stats["loader"].gpu_total_us == pytest.approx(0.6)
    assert stats["rank1.step"].gpu_total_us == pytest.approx(1.0)
    summary: dict[str, Any] = summarize_trace(converted.output)
    structured = summary["structured"]
    assert structured["trace"]["gpu_events"] == 11
    launches = structured["breakdown"]["launches"]
    assert (launches["linked"], launches["unlinked"]) == (10, 1)
    assert "| `forward` | 1 | 4.0 µs |" in summary["markdown"]


def test_the_marker_table_agrees_with_every_range_of_the_converter(
    converted: ConversionResult, events: list[Event]
) -> None:
    # `io` overlaps `loader` without nesting and sits on an overlap track: analysis puts it back
    # on its thread and credits the kernel launched inside both to both, as the converter does.
    stats = marker_stats(converted.output)
    for event in complete_events(events, "user_annotation"):
        args, marker = event["args"], stats[event["name"]]
        assert marker.launches == args["launches"], event["name"]
        assert marker.gpu_events == args["gpu_ops"], event["name"]
        assert marker.gpu_total_us == pytest.approx(args.get("gpu_time_us", 0.0)), event["name"]
    assert stats["io"].gpu_total_us == pytest.approx(0.1)

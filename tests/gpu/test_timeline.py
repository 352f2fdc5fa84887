"""Counter tracks for the trace and low-utilisation stretches inside markers."""

from __future__ import annotations

import copy
import json
import time

import pytest

from ncompass.gpu import GpuMonitor, GpuSample
from ncompass.gpu.timeline import (
    LowUtilisationStretch,
    add_counter_tracks,
    counter_events,
    format_low_utilisation,
    low_utilisation_stretches,
    marker_ranges,
    process_name_event,
    torch_trace_clock_offset_us,
)

BASE_NS = 1_790_000_000_000_000_000  # a wall-clock instant
MS_NS = 1_000_000


def sample(device: int, t_ms: float, util: float | None, **metrics: float) -> GpuSample:
    ns = round(t_ms * MS_NS)
    return GpuSample(device, BASE_NS + ns, 5_000 * MS_NS + ns, util_gpu=util, **metrics)  # type: ignore[arg-type]


def test_counter_events_one_track_per_metric_per_device() -> None:
    samples = [
        sample(0, 0, 50.0, util_mem=10.0, memory_used_bytes=2 * 1024**3, power_w=200.0,
               temperature_c=60.0),
        sample(1, 0, None, power_w=90.0),
        sample(-1, 1, 25.0),
    ]  # fmt: skip
    events = counter_events(samples, pid="gpu", clock_offset_us=-BASE_NS / 1000)
    names = [event["name"] for event in events]
    assert names == [
        "GPU 0 util", "GPU 0 memory util", "GPU 0 memory used", "GPU 0 power",
        "GPU 0 temperature", "GPU 1 power", "CPU util",
    ]  # fmt: skip
    assert all(event["ph"] == "C" and event["pid"] == "gpu" for event in events)
    assert events[0]["ts"] == 0.0 and events[-1]["ts"] == 1000.0
    assert events[0]["args"] == {"%": 50.0} and events[2]["args"] == {"GiB": 2.0}
    json.dumps(events)


def test_counter_events_on_the_monotonic_clock_are_sorted() -> None:
    samples = [sample(0, 20, 1.0), sample(0, 10, 2.0)]
    events = counter_events(samples, pid=1, clock="monotonic", clock_offset_us=-5_000_000)
    assert [event["ts"] for event in events] == [10_000.0, 20_000.0]


def test_process_name_event() -> None:
    assert process_name_event(7) == {
        "name": "process_name", "ph": "M", "pid": 7, "args": {"name": "GPU monitor"}
    }  # fmt: skip


def test_torch_trace_offset_from_base_time() -> None:
    assert torch_trace_clock_offset_us({"baseTimeNanoseconds": 1_790_000_000_000_000_000}) == (
        -1_790_000_000_000_000.0
    )
    assert torch_trace_clock_offset_us({"traceEvents": []}) == 0.0


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[GpuSample]]:
    """A real PyTorch profiler trace with a marker around a monitored region, and its samples."""
    torch = pytest.importorskip("torch")
    from torch.profiler import profile, record_function

    monitor = GpuMonitor(backend="cpu", interval_s=0.01, keep_samples=True)
    with profile() as prof, record_function("monitored"), monitor:
        torch.ones(64, 64) @ torch.ones(64, 64)
        time.sleep(0.05)
    trace_path = tmp_path_factory.mktemp("trace") / "trace.json"
    prof.export_chrome_trace(str(trace_path))
    return json.loads(trace_path.read_text()), monitor.samples


def test_samples_align_with_a_real_torch_profiler_trace(torch_trace: tuple[dict, list]) -> None:
    trace, samples = torch_trace
    ((name, start_us, end_us),) = marker_ranges(trace)
    assert name == "monitored"
    events = counter_events(samples, pid=0, clock_offset_us=torch_trace_clock_offset_us(trace))
    stamps = [event["ts"] for event in events]
    # every sample was taken inside the marker (1 ms of slack for clock reads)
    assert start_us - 1_000 <= min(stamps) and max(stamps) <= end_us + 1_000


def test_counter_tracks_join_the_markers_process_in_a_real_trace(
    torch_trace: tuple[dict, list],
) -> None:
    trace, samples = copy.deepcopy(torch_trace)
    (marker,) = [e for e in trace["traceEvents"] if e.get("name") == "monitored"]
    before = len(trace["traceEvents"])
    added = add_counter_tracks(trace, samples)
    assert added == len(trace["traceEvents"]) - before > 0
    counters = [e for e in trace["traceEvents"] if e.get("ph") == "C"]
    assert {e["pid"] for e in counters} == {marker["pid"]}
    # everything counts as low below 101 %: one stretch covering the monitored region
    ranges = marker_ranges(trace)
    offset = torch_trace_clock_offset_us(trace)
    (stretch,) = low_utilisation_stretches(samples, ranges, 101, clock_offset_us=offset)
    assert ranges[0][1] <= stretch.start_us < stretch.end_us <= ranges[0][2]


def test_counter_tracks_get_their_own_process_without_markers() -> None:
    trace: dict = {"traceEvents": [{"ph": "X", "cat": "kernel", "pid": 3, "ts": 0, "dur": 1}]}
    add_counter_tracks(trace, series(0, [10.0, 20.0]))
    assert trace["traceEvents"][1] == process_name_event(4)
    assert all(e["pid"] == 4 for e in trace["traceEvents"][1:])


def series(device: int, utils: list[float | None], step_ms: float = 10) -> list[GpuSample]:
    return [sample(device, i * step_ms, util) for i, util in enumerate(utils)]


def us(ms: float) -> float:
    return ms * 1000


TO_ZERO = -BASE_NS / 1000  # clock offset that puts BASE_NS at trace time 0


def test_low_stretches_are_found_and_clipped_to_each_range() -> None:
    # periods (ending at the sample): 0-10: 90, 10-20: 5, 20-30: 5, 30-40: 90, 40-50: 0
    samples = series(0, [0, 90, 5, 5, 90, 0])
    ranges = [("forward", us(0), us(50)), ("attn", us(15), us(45))]
    stretches = low_utilisation_stretches(samples, ranges, threshold=30, clock_offset_us=TO_ZERO)
    assert stretches == [
        LowUtilisationStretch("forward", 0, us(10), us(30), 5.0, 2),
        LowUtilisationStretch("forward", 0, us(40), us(50), 0.0, 1),
        LowUtilisationStretch("attn", 0, us(15), us(30), 5.0, 2),
        LowUtilisationStretch("attn", 0, us(40), us(45), 0.0, 1),
    ]
    assert stretches[2].duration_us == 15_000


def test_missing_readings_end_a_stretch_and_devices_are_separate() -> None:
    samples = series(0, [0, 0, None, 0]) + series(1, [0, 100, 100, 100])
    stretches = low_utilisation_stretches(
        samples, [("step", us(0), us(100))], threshold=50, clock_offset_us=TO_ZERO
    )
    assert [(s.device, s.start_us, s.end_us) for s in stretches] == [
        (0, us(0), us(10)),
        (0, us(20), us(30)),
    ]


def test_min_duration_and_threshold() -> None:
    samples = series(0, [0, 10, 10, 50, 10])
    found = low_utilisation_stretches(
        samples,
        [("r", us(0), us(40))],
        threshold=20,
        min_duration_us=15_000,
        clock_offset_us=TO_ZERO,
    )
    assert [(s.start_us, s.end_us) for s in found] == [(us(0), us(20))]
    ranges = [("r", us(0), us(40))]
    # "below" is strict: 10 % is not below 10 %
    assert low_utilisation_stretches(samples, ranges, threshold=10, clock_offset_us=TO_ZERO) == []
    # without the offset, wall-clock samples lie far from trace time 0
    assert low_utilisation_stretches(samples, ranges, threshold=20) == []


def test_ranges_outside_the_samples_find_nothing() -> None:
    samples = series(0, [0, 0, 0])
    ranges = [("later", us(100), us(200))]
    assert low_utilisation_stretches(samples, ranges, threshold=50, clock_offset_us=TO_ZERO) == []


def test_format_low_utilisation_groups_by_marker_worst_first() -> None:
    stretches = [
        LowUtilisationStretch("attn", 0, 0, 100_000, 4.0, 10),
        LowUtilisationStretch("mlp", 0, 0, 30_000, 10.0, 3),
        LowUtilisationStretch("attn", 0, 200_000, 300_000, 6.0, 10),
    ]
    lines = format_low_utilisation(stretches, threshold=30)
    assert lines == [
        "low utilisation (< 30%) inside markers:",
        "  attn · GPU 0: 200.0 ms at 5% (2 stretches)",
        "  mlp · GPU 0: 30.0 ms at 10% (1 stretch)",
    ]
    assert format_low_utilisation([], threshold=30) == []
    assert format_low_utilisation(stretches, threshold=30, limit=1)[-1] == "  … and 1 more"

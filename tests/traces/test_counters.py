"""Counter tracks added by streaming give the same trace as adding them to the loaded document."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ncompass.errors import TraceError
from ncompass.gpu import GpuSample
from ncompass.gpu.timeline import (
    add_counter_tracks,
    counter_events,
    marker_ranges,
    process_name_event,
    torch_trace_clock_offset_us,
)
from ncompass.traces.counters import CounterPlacement, append_counter_tracks, counter_placement
from tests.traces.builders import shared_trace

MS_NS = 1_000_000


def load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)


def samples_from(base_ns: int) -> list[GpuSample]:
    return [
        GpuSample(0, base_ns + i * 10 * MS_NS, i * 10 * MS_NS, util_gpu=float(10 * i))  # type: ignore[arg-type]
        for i in range(8)
    ]


def add_by_streaming(path: Path, samples: list[GpuSample]) -> int:
    """What ``ncompass run --gpu-monitor`` does, on the streaming pass."""

    def counters_at(placement: CounterPlacement) -> list[dict[str, Any]]:
        added = [process_name_event(placement.pid)] if placement.new_process else []
        return added + counter_events(
            samples, pid=placement.pid, clock_offset_us=placement.clock_offset_us
        )

    return append_counter_tracks(path, counters_at)[1]


@pytest.mark.parametrize("name", ["torch", "shared"])
def test_streamed_counters_equal_the_whole_document_ones(
    name: str, torch_trace: Path, tmp_path: Path
) -> None:
    source = torch_trace if name == "torch" else shared_trace("trace_filter")
    trace = tmp_path / source.name
    shutil.copyfile(source, trace)
    document = load(trace)
    samples = samples_from(int(document.get("baseTimeNanoseconds", 0)) + 5 * MS_NS)
    placement = counter_placement(trace)
    assert placement.marker_ranges == marker_ranges(document)
    assert placement.clock_offset_us == torch_trace_clock_offset_us(document)
    expected_count = add_counter_tracks(document, samples)
    assert add_by_streaming(trace, samples) == expected_count > 0
    assert load(trace) == document
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial left


def test_keys_after_the_events_stay_after_them(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(
        '{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "kernel", "pid": 3, '
        '"ts": 0, "dur": 1}], "baseTimeNanoseconds": 1000}'
    )
    assert add_by_streaming(trace, samples_from(1000)) == 9  # a process name + 8 counters
    text = trace.read_text()
    assert text.index('"schemaVersion"') < text.index('"traceEvents"')
    assert text.index('"baseTimeNanoseconds"') > text.index('"traceEvents"')
    events = json.loads(text)["traceEvents"]
    assert events[1] == process_name_event(4) and all(e["pid"] == 4 for e in events[1:])


def test_a_corrupt_trace_is_left_as_it_was(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": ')
    before = trace.read_bytes()
    with pytest.raises(TraceError, match=r"truncated|cannot read"):
        append_counter_tracks(trace, lambda placement: [{"ph": "C", "ts": 0}])
    assert trace.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]

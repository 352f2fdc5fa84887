from __future__ import annotations

from pathlib import Path

from ncompass.analysis.idle import classify_idle_gaps
from ncompass.traces.link import link_trace
from tests.traces.builders import TraceBuilder


def test_gaps_are_host_bound_queued_or_unknown(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("loop", 0, 1000)
    builder.launch("a", 0, 1, 10, 10)  # busy until 20
    builder.launch("b", 50, 1, 60, 10)  # launched at 50, after the GPU idled at 20: host-bound
    builder.launch("c", 65, 1, 100, 10)  # launched at 65, before the GPU idled at 70: queued
    builder.gpu("d", 130, 10)  # no launch in the trace: unknown
    trace = link_trace(builder.write(tmp_path / "t.json"))
    order = sorted(range(len(trace.gpu)), key=trace.gpu.start.__getitem__)
    gaps = classify_idle_gaps(trace, order)
    assert (gaps.count, gaps.total_us) == (3, 40 + 30 + 20)
    assert (gaps.host_bound_count, gaps.host_bound_us) == (1, 40.0)
    assert (gaps.not_host_bound_count, gaps.not_host_bound_us) == (1, 30.0)
    assert (gaps.unknown_count, gaps.unknown_us) == (1, 20.0)
    assert gaps.host_bound_us_by_marker == {"loop": 40.0}
    assert [gap.next_event for gap in gaps.largest] == ["b", "c", "d"]
    assert gaps.largest[0].to_dict()["marker"] == "loop"


def test_no_gpu_events_no_gaps(tmp_path: Path) -> None:
    trace = link_trace(TraceBuilder().marker("m", 0, 1).write(tmp_path / "t.json"))
    assert classify_idle_gaps(trace, []).count == 0

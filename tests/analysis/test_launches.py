from __future__ import annotations

from pathlib import Path

from ncompass.analysis.launches import launch_statistics
from ncompass.traces.link import link_trace
from tests.traces.builders import TraceBuilder


def test_launch_delay_and_cpu_versus_gpu_duration(tmp_path: Path) -> None:
    builder = TraceBuilder()
    builder.launch("tiny", 0, 10, 12, 2)  # delay 12, GPU shorter than its 10 µs launch
    builder.launch("big", 20, 4, 30, 50)  # delay 10
    builder.gpu("orphan", 100, 1)  # no launch
    trace = link_trace(builder.write(tmp_path / "t.json"))
    stats = launch_statistics(trace, range(len(trace.gpu)))
    assert (stats.gpu_events, stats.linked, stats.unlinked, stats.shorter_than_launch) == (
        3,
        2,
        1,
        1,
    )
    assert (stats.launch_delay_us.mean, stats.launch_delay_us.max) == (11.0, 12.0)
    assert stats.launch_cpu_us.mean == 7.0
    assert stats.gpu_duration_us.max == 50.0
    assert stats.to_dict()["unlinked"] == 1

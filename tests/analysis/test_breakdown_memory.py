"""The breakdown of a large trace keeps compact columns, not a Python object per GPU event."""

from __future__ import annotations

import tracemalloc

import pytest

from ncompass.analysis.breakdown import rank_breakdown
from ncompass.traces.link import LinkedTrace, link_trace
from tests.traces.builders import TraceBuilder

EVENTS = 20_000
# The index sort is the peak: a list of ints and one of float keys, ~72 bytes an event. A list
# of (start, end) tuples per union, or a Python object per event, takes it past 300.
BYTES_PER_EVENT = 120


@pytest.fixture(scope="module")
def many_gpu_events(tmp_path_factory: pytest.TempPathFactory) -> LinkedTrace:
    """GPU events of all three classes, each after an idle gap, over two ProfilerSteps."""
    builder = TraceBuilder()
    builder.marker("ProfilerStep#1", 0, 10 * EVENTS).marker("ProfilerStep#2", 10 * EVENTS, 100)
    kinds = [("gemm", "kernel"), ("ncclKernel_AllReduce", "kernel"), ("Memcpy HtoD", "gpu_memcpy")]
    for index in range(EVENTS):
        name, category = kinds[index % len(kinds)]
        start = 10 * (EVENTS - index)  # written latest first: the breakdown must sort them
        builder.launch(name, start - 3, 1, start, 5, stream=7 + index % 2, category=category)
    return link_trace(builder.write(tmp_path_factory.mktemp("many") / "trace.json"))


@pytest.mark.parametrize("exclude_last_step", [False, True])
def test_breakdown_memory_stays_within_bytes_per_event(
    many_gpu_events: LinkedTrace, exclude_last_step: bool
) -> None:
    tracemalloc.start()
    try:
        result = rank_breakdown(many_gpu_events, 0, exclude_last_profiler_step=exclude_last_step)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.gpu_events == EVENTS
    assert result.idle_gaps.count == EVENTS - 1
    assert peak < BYTES_PER_EVENT * EVENTS, f"{peak / EVENTS:.0f} bytes per GPU event"

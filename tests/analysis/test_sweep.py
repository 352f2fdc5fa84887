"""The breakdown's sweeps in C (``_sweep.c``) give what the Python loops give, to the last bit."""

from __future__ import annotations

import math
import random
from array import array
from pathlib import Path
from typing import Any

import pytest

from ncompass.analysis import _native
from ncompass.analysis.breakdown import in_start_order, rank_breakdown
from ncompass.analysis.timeline import busy_timeline
from ncompass.traces.link import LinkedTrace, link_trace
from tests.traces.builders import TraceBuilder, shared_traces

REPO = Path(__file__).parents[2]
sweep = _native.sweep
if sweep is None:
    pytest.skip("ncompass.analysis._sweep is not built here", allow_module_level=True)


def both_ways(
    trace: LinkedTrace, monkeypatch: pytest.MonkeyPatch, *, timeline: bool = True
) -> list[dict[str, Any]]:
    """The breakdown of ``trace`` (both windows) and its timeline with the C sweeps, then with
    the Python loops."""
    results = []
    for module in (sweep, None):
        monkeypatch.setattr(_native, "sweep", module)
        results.append(
            {
                window: repr(rank_breakdown(trace, 0, exclude_last_profiler_step=window))
                for window in (False, True)
            }
            | ({"timeline": repr(busy_timeline(trace))} if timeline else {})
        )
    return results


@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_traces_break_down_identically(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    in_c, in_python = both_ways(link_trace(path, progress=False), monkeypatch)
    assert in_c == in_python


def random_trace(seed: int, path: Path, *, in_start_order: bool = False) -> Path:
    """Launches, kernels of every class on two streams, nested markers in ProfilerSteps, ties in
    start times, unlinked kernels, zero-length ones and overlaps: what the sweeps branch on."""
    generator = random.Random(seed)
    builder = TraceBuilder()
    for step in range(4):
        builder.marker(f"ProfilerStep#{step}", step * 1000.0, 990.0)
        builder.marker(f"layer[{step % 2}]", step * 1000.0 + 10, 400.0)
    names = ("gemm_kernel", "ncclKernel_AllReduce", "Memcpy HtoD (Pageable -> Device)", "elt")
    times = []
    for _ in range(300):
        launch_ts = round(generator.uniform(0, 3990), generator.choice((0, 1, 3)))
        kernel_ts = launch_ts + generator.choice((0.0, 0.5, 3.0, generator.uniform(0, 80)))
        times.append((launch_ts, kernel_ts))
    if in_start_order:  # GPU events written in order of start, as a stream records them
        times.sort(key=lambda pair: pair[1])
    for launch_ts, kernel_ts in times:
        duration = generator.choice((0.0, 1.0, generator.uniform(0, 30)))
        name = generator.choice(names)
        category = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
        if generator.random() < 0.1:  # no launch on the CPU side
            builder.gpu(name, kernel_ts, duration, stream=generator.choice((7, 8)))
        else:
            builder.launch(
                name,
                launch_ts,
                generator.uniform(0, 5),
                kernel_ts,
                duration,
                stream=generator.choice((7, 8)),
                category=category,
            )
    return builder.write(path)


@pytest.mark.parametrize("seed", range(12))
def test_random_traces_break_down_identically(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = link_trace(random_trace(seed, tmp_path / "t.json"), progress=False)
    in_c, in_python = both_ways(trace, monkeypatch)
    assert in_c == in_python
    assert "IdleGap(" in in_c[False]  # the sweep met gaps


@pytest.mark.parametrize("seed", range(4))
def test_events_in_start_order_break_down_identically_without_an_index_column(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = random_trace(seed, tmp_path / "t.json", in_start_order=True)
    trace = link_trace(path, progress=False)
    everything = range(len(trace.gpu))
    assert in_start_order(trace.gpu.start, everything) is everything  # no index column
    in_c, in_python = both_ways(trace, monkeypatch)
    assert in_c == in_python
    assert "IdleGap(" in in_c[False]


def test_nan_start_times_are_ordered_by_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = TraceBuilder().marker("ProfilerStep#1", 0, 50).marker("ProfilerStep#2", 60, 50)
    starts = (30.0, math.nan, 10.0, 10.0, 70.0, math.nan, 5.0)
    for kernel_ts in starts:
        builder.launch("gemm", kernel_ts - 2 if kernel_ts == kernel_ts else 1, 1, 1.0, 4)
    trace = link_trace(builder.write(tmp_path / "t.json"), progress=False)
    # the reader refuses a NaN time; columns made some other way may still hold one
    for index, start in enumerate(starts):
        trace.gpu.start[index] = start
    everything = array("l", range(len(trace.gpu)))
    assert sweep.order_by_start(trace.gpu.start, everything) is None  # left to sorted()
    # (the timeline's bins of a NaN time are int(nan): a ValueError either way)
    in_c, in_python = both_ways(trace, monkeypatch, timeline=False)
    assert in_c == in_python


def test_columns_of_the_wrong_type_or_length_are_refused() -> None:
    starts = array("d", [1.0, 2.0])
    with pytest.raises(TypeError, match="'l'"):
        sweep.order_by_start(starts, array("i", [0, 1]))
    with pytest.raises(IndexError):
        sweep.order_by_start(starts, array("l", [0, 2]))
    with pytest.raises(IndexError):
        sweep.merge_union(starts, starts, array("b", [0, 5]), array("l", [0, 1]), 3, -1, None, None)
    with pytest.raises(IndexError):
        sweep.union_coverage(starts, starts, array("b", [0, 0]), array("l", [0, 2]), 3, -1, 0, 1, 9)
    with pytest.raises(ValueError, match="length"):  # the output columns must fit the union
        sweep.merge_union(
            starts, starts, array("b", [0, 0]), array("l", [0, 1]), 3, -1, array("d"), array("d")
        )
    with pytest.raises(TypeError, match="'d'"):
        sweep.sort_doubles(array("f", [1.0]))
    with pytest.raises(BufferError):  # sorted in place: a read-only buffer is refused
        sweep.order_by_start(starts, memoryview(array("l", [0, 1]).tobytes()).cast("l"))
    with pytest.raises(IndexError):
        sweep.launch_column(
            array("i", [0, 3]), starts, starts, starts, starts, array("l", [0, 1]), 0, None
        )

"""The ``nvtx`` context, verified through a real NVTX tool (the ncompass recorder) in a child."""

from __future__ import annotations

import sys
from collections import defaultdict

from ncompass.capture.nvtx_recorder import NvtxRange
from ncompass.runtime.sites import bind

from .conftest import RunRecorded

# Written exactly the way the rewriter generates markers.
GENERATED_SHAPE_CHILD = """
import asyncio
import threading

import ncompass.runtime.sites as __ncompass_runtime__
from ncompass.trace.profile.nvtx import NvtxContext
from ncompass.trace.profile.torch import TorchRecordContext

__nc_enter_1, __nc_exit_1 = __ncompass_runtime__.bind(
    "nvtx", "worker.step", dynamic=False, async_safe=False)
__nc_enter_2, __nc_exit_2 = __ncompass_runtime__.bind(
    "nvtx", "inner[{i}]", dynamic=True, async_safe=False, color="red")
__nc_enter_3, __nc_exit_3 = __ncompass_runtime__.bind(
    "nvtx", "task[{n}]", dynamic=True, async_safe=True)
__nc_enter_4, __nc_exit_4 = __ncompass_runtime__.bind(
    "nvtx", "handoff", dynamic=False, async_safe=True)
__nc_enter_5, __nc_exit_5 = __ncompass_runtime__.bind(
    "ncompass.trace.profile.nvtx.NvtxContext", "failing", dynamic=False, async_safe=False)

barrier = threading.Barrier(2)


def step(i):
    __nc_h1 = __nc_enter_1()
    try:
        barrier.wait()
        for j in range(2):
            __nc_h2 = __nc_enter_2(lambda: f"inner[{i}.{j}]")
            try:
                pass
            finally:
                __nc_exit_2(__nc_h2)
    finally:
        __nc_exit_1(__nc_h1)


async def task(n):
    __nc_h3 = __nc_enter_3(lambda: f"task[{n}]")
    try:
        await asyncio.sleep(0.005 * (3 - n))
    finally:
        __nc_exit_3(__nc_h3)


def failing():
    __nc_h5 = __nc_enter_5()
    try:
        raise KeyError("boom")
    finally:
        __nc_exit_5(__nc_h5)


async def main():
    await asyncio.gather(task(0), task(1), task(2))


threads = [threading.Thread(target=step, args=(i,)) for i in (1, 2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
asyncio.run(main())

handle = __nc_enter_4()
ender = threading.Thread(target=__nc_exit_4, args=(handle,))
ender.start()
ender.join()

try:
    failing()
except KeyError:
    pass

with NvtxContext("seed.nvtx", color="#00ff00"):
    with TorchRecordContext("seed.torch"):  # torch is not imported: records nothing
        with NvtxContext("seed.nested"):
            pass
"""


def by_thread(ranges: list[NvtxRange]) -> dict[int, list[NvtxRange]]:
    grouped: dict[int, list[NvtxRange]] = defaultdict(list)
    for nvtx_range in ranges:
        grouped[nvtx_range.tid].append(nvtx_range)
    return grouped


def test_generated_markers_record_names_nesting_and_balance_per_thread(
    run_recorded: RunRecorded,
) -> None:
    (recording,) = run_recorded(GENERATED_SHAPE_CHILD)

    assert recording.unmatched_pops == 0
    assert recording.unmatched_ends == 0
    assert recording.dropped_events == 0
    assert all(r.end_ns is not None for r in recording.ranges), "every range was closed"
    assert {r.domain for r in recording.ranges} == {"ncompass"}

    pushed = [r for r in recording.ranges if r.kind == "push_pop"]
    workers = [ranges for ranges in by_thread(pushed).values() if ranges[0].name == "worker.step"]
    assert len(workers) == 2
    seen_inner = set()
    for ranges in workers:
        outer, *inner = ranges
        assert (outer.name, outer.depth) == ("worker.step", 0)
        assert [r.depth for r in inner] == [1, 1]
        assert all(outer.start_ns <= r.start_ns and r.end_ns <= outer.end_ns for r in inner)
        assert all(r.color == 0xFFFF0000 for r in inner)
        seen_inner.update(r.name for r in inner)
    assert seen_inner == {"inner[1.0]", "inner[1.1]", "inner[2.0]", "inner[2.1]"}
    first, second = (ranges[0] for ranges in workers)
    assert first.tid != second.tid
    # The barrier inside both outer ranges makes them overlap in time on two threads.
    assert first.start_ns < second.end_ns and second.start_ns < first.end_ns


def test_async_safe_markers_use_start_end_ranges_that_may_interleave(
    run_recorded: RunRecorded,
) -> None:
    (recording,) = run_recorded(GENERATED_SHAPE_CHILD)

    tasks = sorted(
        (r for r in recording.ranges if r.name.startswith("task[")), key=lambda r: r.name
    )
    assert [r.name for r in tasks] == ["task[0]", "task[1]", "task[2]"]
    assert all(r.kind == "start_end" and r.range_id for r in tasks)
    assert len({r.tid for r in tasks}) == 1
    # All three started before the first one ended: interleaved on one thread, which a
    # push/pop stack could not represent.
    assert max(r.start_ns for r in tasks) < min(r.end_ns for r in tasks)
    # task[2] sleeps least, so it ends first although it started last.
    assert tasks[2].end_ns < tasks[0].end_ns

    (handoff,) = (r for r in recording.ranges if r.name == "handoff")
    assert handoff.kind == "start_end"
    assert handoff.end_tid is not None and handoff.end_tid != handoff.tid


def test_exceptions_and_seed_classes_keep_nvtx_ranges_balanced(
    run_recorded: RunRecorded,
) -> None:
    (recording,) = run_recorded(GENERATED_SHAPE_CHILD)

    (failing,) = (r for r in recording.ranges if r.name == "failing")
    assert failing.end_ns is not None
    seed = {r.name: r for r in recording.ranges if r.name.startswith("seed.")}
    assert set(seed) == {"seed.nvtx", "seed.nested"}
    assert seed["seed.nvtx"].color == 0xFF00FF00
    assert (seed["seed.nvtx"].depth, seed["seed.nested"].depth) == (0, 1)


def test_torch_plus_nvtx_records_nvtx_even_without_a_torch_profiler(
    run_recorded: RunRecorded,
) -> None:
    (recording,) = run_recorded(
        """
        import ncompass.runtime.sites as __ncompass_runtime__
        __nc_enter_1, __nc_exit_1 = __ncompass_runtime__.bind(
            "torch+nvtx", "both", dynamic=False, async_safe=False)
        __nc_enter_2, __nc_exit_2 = __ncompass_runtime__.bind(
            "torch+nvtx", "both[{k}]", dynamic=True, async_safe=True)
        for k in range(3):
            __nc_h1 = __nc_enter_1()
            try:
                __nc_h2 = __nc_enter_2(lambda: f"both[{k}]")
                try:
                    pass
                finally:
                    __nc_exit_2(__nc_h2)
            finally:
                __nc_exit_1(__nc_h1)
        """
    )
    names = sorted(r.name for r in recording.ranges)
    assert names == ["both", "both", "both", "both[0]", "both[1]", "both[2]"]
    assert recording.unmatched_pops == 0


def test_without_an_nvtx_tool_markers_are_idle_builtins_and_nvtx_is_not_imported() -> None:
    was_imported = "nvtx" in sys.modules
    enter, exit_range = bind("nvtx", "idle")
    dynamic_enter, dynamic_exit = bind("nvtx", "idle[{x}]", dynamic=True, async_safe=True)

    calls: list[int] = []
    handle = dynamic_enter(lambda: calls.append(1))
    dynamic_exit(handle)
    exit_range(enter())

    assert calls == [], "the name function is never called when nothing records"
    assert type(enter).__name__ in {"type", "builtin_function_or_method"}
    if not was_imported:
        assert "nvtx" not in sys.modules

"""The ``torch`` context inside and outside a real torch profiler."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from ncompass.runtime.sites import bind

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

__nc_enter_1, __nc_exit_1 = bind("torch", "layer.forward", dynamic=False, async_safe=False)
__nc_enter_2, __nc_exit_2 = bind("torch", "attn[{i}]", dynamic=True, async_safe=False)
__nc_enter_3, __nc_exit_3 = bind("torch", "handoff", dynamic=False, async_safe=True)
__nc_enter_4, __nc_exit_4 = bind(
    "ncompass.trace.profile.torch.TorchRecordContext", "seed.path", dynamic=False
)


def layer(i: int) -> Any:
    __nc_h1 = __nc_enter_1()
    try:
        __nc_h2 = __nc_enter_2(lambda: f"attn[{i}]")
        try:
            return torch.ones(4) * i
        finally:
            __nc_exit_2(__nc_h2)
    finally:
        __nc_exit_1(__nc_h1)


def annotations(prof: Any, tmp_path: Path) -> list[dict[str, Any]]:
    trace_file = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace_file))
    events = json.loads(trace_file.read_text())["traceEvents"]
    return [e for e in events if e.get("cat") == "user_annotation"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """One profiler session (the first start in a process costs seconds) covering the cases.

    By default the torch profiler only follows the thread that started it; worker threads are
    recorded with ``profile_all_threads``. On those threads ``_profiler_enabled()`` stays False,
    which is one reason markers read torch's Python-level flag instead.
    """
    config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    with profile(activities=[ProfilerActivity.CPU], experimental_config=config) as prof:
        layer(0)
        layer(1)
        worker = threading.Thread(target=layer, args=(7,))
        worker.start()
        worker.join()
        handle = __nc_enter_3()
        ender = threading.Thread(target=__nc_exit_3, args=(handle,))
        ender.start()
        ender.join()
        __nc_exit_4(__nc_enter_4())
    return annotations(prof, tmp_path_factory.mktemp("torch-trace"))


def test_markers_are_user_annotation_events_with_their_names(
    recorded: list[dict[str, Any]],
) -> None:
    names = sorted(e["name"] for e in recorded)
    assert names == sorted(
        ["layer.forward"] * 3 + ["attn[0]", "attn[1]", "attn[7]", "handoff", "seed.path"]
    )


def test_dynamic_names_nest_inside_their_enclosing_marker(
    recorded: list[dict[str, Any]],
) -> None:
    outers = [e for e in recorded if e["name"] == "layer.forward"]
    for inner in (e for e in recorded if e["name"].startswith("attn[")):
        (outer,) = [
            o
            for o in outers
            if o["tid"] == inner["tid"]
            and o["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= o["ts"] + o["dur"]
        ]
        assert outer["name"] == "layer.forward"


def test_markers_on_other_threads_and_cross_thread_exits_are_recorded(
    recorded: list[dict[str, Any]],
) -> None:
    (worker_attn,) = [e for e in recorded if e["name"] == "attn[7]"]
    (main_attn,) = [e for e in recorded if e["name"] == "attn[0]"]
    assert worker_attn["tid"] != main_attn["tid"]
    (handoff,) = [e for e in recorded if e["name"] == "handoff"]
    assert handoff["dur"] >= 0


def test_idle_markers_record_nothing_and_allocate_nothing() -> None:
    calls: list[int] = []

    def run(count: int) -> None:
        for _ in range(count):
            __nc_h1 = __nc_enter_1()
            try:
                __nc_h2 = __nc_enter_2(lambda: calls.append(1) or "never")
                try:
                    pass
                finally:
                    __nc_exit_2(__nc_h2)
            finally:
                __nc_exit_1(__nc_h1)

    def growth() -> tuple[int, int]:
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            blocks_before = sys.getallocatedblocks()
            run(20_000)
            blocks_after = sys.getallocatedblocks()
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return after - before, blocks_after - blocks_before

    run(1000)  # warm up specialisation caches
    # tracemalloc sees every thread (pytest-xdist's I/O thread too): an allocation of the
    # markers shows in every attempt, another thread's now and then, so the least one counts
    grown_bytes, grown_blocks = min(growth() for _ in range(3))
    assert calls == [], "a dynamic name is only computed when a profiler records"
    assert grown_bytes < 1024
    assert grown_blocks < 16
    assert __nc_enter_1() is __nc_enter_1(), "the idle handle is one shared object"


def test_torch_is_resolved_on_first_enter_not_at_bind(tmp_path: Path) -> None:
    script = tmp_path / "lazy.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import ncompass.runtime.sites as __ncompass_runtime__
            __nc_enter_1, __nc_exit_1 = __ncompass_runtime__.bind("torch", "early")
            __nc_exit_1(__nc_enter_1())
            assert "torch" not in sys.modules, "binding and idle markers never import torch"

            import torch
            from torch.profiler import profile, ProfilerActivity
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                __nc_exit_1(__nc_enter_1())
            prof.export_chrome_trace(sys.argv[1])
            """
        )
    )
    trace_file = tmp_path / "lazy.json"
    result = subprocess.run(
        [sys.executable, str(script), str(trace_file)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    events = json.loads(trace_file.read_text())["traceEvents"]
    assert [e["name"] for e in events if e.get("cat") == "user_annotation"] == ["early"]

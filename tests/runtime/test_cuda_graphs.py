"""Markers while a CUDA graph is captured: nothing recorded, a warning, and a record of it.

There is no GPU here: the capture is faked behind what the real path reads in ``torch.cuda``
(its ``_initialized`` flag and ``is_current_stream_capturing()``); everything else (the
markers, the torch profiler, the trace, the NVTX recorder) is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ncompass.capture.trace_files import sidecar_path
from ncompass.runtime import cuda_graphs
from ncompass.runtime.base import RangeContextWarning
from ncompass.runtime.sites import bind

from .conftest import RunRecorded

torch = pytest.importorskip("torch")


class FakeCapture:
    """Stands in for CUDA's stream-capture state; counts how often it is asked."""

    def __init__(self) -> None:
        self.capturing = False
        self.asked = 0

    def is_current_stream_capturing(self) -> bool:
        self.asked += 1
        return self.capturing


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCapture]:
    fake = FakeCapture()
    monkeypatch.setattr(torch.cuda, "_initialized", True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", fake.is_current_stream_capturing)
    cuda_graphs.forget_captured_markers()
    yield fake
    cuda_graphs.forget_captured_markers()


def _step(enter: Any, exit_range: Any) -> Any:
    handle = enter()
    try:
        return torch.ones(4) * 2
    finally:
        exit_range(handle)


def _profiled(tmp_path: Path, steps: list[tuple[Any, Any]]) -> dict[str, Any]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        for enter, exit_range in steps:
            _step(enter, exit_range)
    path = tmp_path / "trace.json"
    profiler.export_chrome_trace(str(path))
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _annotations(document: dict[str, Any]) -> list[str]:
    return [e["name"] for e in document["traceEvents"] if e.get("cat") == "user_annotation"]


def test_torch_marker_records_nothing_during_capture_and_says_so(
    capture: FakeCapture, tmp_path: Path
) -> None:
    captured = bind("torch", "decode.layer")
    replayed_later = bind("torch", "decode.sample")
    capture.capturing = True
    with pytest.warns(RangeContextWarning, match="replays as a CUDA graph") as warned:
        document = _profiled(tmp_path, [captured, captured])
    assert len(warned) == 1  # once per marker
    assert warned[0].filename == __file__  # points at the marked code, not at ncompass
    assert "decode.layer" not in _annotations(document)
    assert document[cuda_graphs.TRACE_METADATA_KEY] == ["decode.layer"]
    assert cuda_graphs.graph_captured_markers() == ["decode.layer"]

    capture.capturing = False
    document = _profiled(tmp_path, [captured, replayed_later])
    assert _annotations(document) == ["decode.layer", "decode.sample"]


def test_composite_and_dynamic_markers_skip_every_part(
    capture: FakeCapture, tmp_path: Path
) -> None:
    dynamic_enter, dynamic_exit = bind("torch+nvtx", "layer[{i}]", dynamic=True)
    capture.capturing = True

    def dynamic() -> object:
        return dynamic_enter(lambda: "layer[3]")

    with pytest.warns(RangeContextWarning):
        document = _profiled(tmp_path, [(dynamic, dynamic_exit)])
    assert _annotations(document) == []
    assert cuda_graphs.graph_captured_markers() == ["layer[{i}]"]


def test_idle_markers_never_ask_about_capture(capture: FakeCapture) -> None:
    capture.capturing = True
    for context in ("torch", "nvtx", "torch+nvtx", "noop"):
        _step(*bind(context, "idle"))
    assert capture.asked == 0
    assert cuda_graphs.graph_captured_markers() == []


def test_capture_is_not_asked_before_cuda_is_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    # CPU builds: torch.cuda.is_current_stream_capturing raises; it must not be reached.
    def unavailable() -> bool:
        raise RuntimeError("Tried to instantiate dummy base class _cuda_isCurrentStreamCapturing")

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", unavailable)
    assert not torch.cuda.is_initialized() and not torch.cuda._initialized
    assert cuda_graphs.skipped_in_capture("any") is False


def test_nvtx_marker_pushes_nothing_during_capture(run_recorded: RunRecorded) -> None:
    recordings = run_recorded(
        """
        import warnings
        import torch
        from ncompass.runtime.sites import bind

        state = {"capturing": False}
        torch.cuda._initialized = True
        torch.cuda.is_current_stream_capturing = lambda: state["capturing"]

        enter, exit_range = bind("nvtx", "decode.layer")
        start, end = bind("nvtx", "decode.task", async_safe=True)

        def step(enter, exit_range):
            handle = enter()
            try:
                pass
            finally:
                exit_range(handle)

        step(enter, exit_range)
        step(start, end)
        state["capturing"] = True
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step(enter, exit_range)
            step(start, end)
        assert len(caught) == 2, [str(w.message) for w in caught]
        state["capturing"] = False
        step(enter, exit_range)
        """
    )
    names = [r.name for recording in recordings for r in recording.ranges]
    assert sorted(names) == ["decode.layer", "decode.layer", "decode.task"]


CAPTURED_RUN = """
import torch
import captured_model

torch.cuda._initialized = True  # no GPU here: the capture is faked, the rest is real
capturing = {"now": False}
torch.cuda.is_current_stream_capturing = lambda: capturing["now"]

captured_model.step(torch.ones(4))  # before the capture: recorded
capturing["now"] = True
captured_model.step(torch.ones(4))  # "captured": nothing recorded
capturing["now"] = False
"""

CAPTURED_MODEL = """
def step(x):
    return x * 2
"""

CAPTURED_SPEC = """
version: 1
context: torch
targets:
  - module: captured_model
    functions:
      - qualname: step
        name: decode.step
"""


@pytest.mark.parametrize("profiler", ["torch", "nvtx-trace"])
def test_ncompass_run_records_which_markers_were_captured(tmp_path: Path, profiler: str) -> None:
    (tmp_path / "captured_model.py").write_text(CAPTURED_MODEL)
    (tmp_path / "run_captured.py").write_text(CAPTURED_RUN)
    (tmp_path / "spec.yaml").write_text(CAPTURED_SPEC)
    command = [sys.executable, "-m", "ncompass", "run", "--config", "spec.yaml"]
    command += ["--profiler", profiler, "--output-dir", "out", "--trace-name", "run"]
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run(
        [*command, "run_captured.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "replays as a CUDA graph" in done.stderr
    sidecar = json.loads(sidecar_path(tmp_path / "out" / "run.json").read_text())
    assert sidecar["cuda_graph_markers"] == ["decode.step"]
    trace = json.loads((tmp_path / "out" / "run.json").read_text())
    ranges = [e for e in trace["traceEvents"] if e.get("name") == "decode.step"]
    assert len(ranges) == 1, "recorded before the capture only"
    if profiler == "torch":
        assert trace[cuda_graphs.TRACE_METADATA_KEY] == ["decode.step"]

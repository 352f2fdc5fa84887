"""Traces for tests: tiny hand-made ones with known answers, real torch.profiler ones, and the
shared real Kineto traces."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The shared real traces (HTA's public test data, MIT licence), copied into the repository so a
# clean clone tests against them; see tests/data/traces/README.md.
SHARED_TRACES = Path(__file__).resolve().parents[1] / "data" / "traces" / "hta"
CPU_PID = 100
GPU_PID = 0


def shared_traces() -> list[Path]:
    """Every shared real trace (tests/data/traces/hta)."""
    found = sorted(SHARED_TRACES.rglob("*.json.gz"))
    if not found:
        raise FileNotFoundError(f"the real traces are missing from {SHARED_TRACES}")
    return found


def shared_trace(folder: str) -> Path:
    """The one shared trace in ``folder`` (e.g. ``"amd_trace"``)."""
    return next((SHARED_TRACES / folder).rglob("*.json.gz"))


@dataclass
class TraceBuilder:
    """Builds a small Kineto-like trace: markers, CPU ops, launches and GPU events."""

    events: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=lambda: {"schemaVersion": 1})
    _correlation: int = 0

    def marker(self, name: str, ts: float, dur: float, tid: int = 1) -> TraceBuilder:
        self.events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": name,
                "pid": CPU_PID,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": {},
            }
        )
        return self

    def cpu_op(self, name: str, ts: float, dur: float, tid: int = 1) -> TraceBuilder:
        self.events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": CPU_PID,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": {},
            }
        )
        return self

    def runtime(self, name: str, ts: float, dur: float, tid: int = 1) -> int:
        """A CPU runtime call with a fresh correlation id; returns the id."""
        self._correlation += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": CPU_PID,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": {"correlation": self._correlation},
            }
        )
        return self._correlation

    def gpu(
        self,
        name: str,
        ts: float,
        dur: float,
        *,
        correlation: int | None = None,
        stream: int = 7,
        category: str = "kernel",
        **args: Any,
    ) -> TraceBuilder:
        event_args: dict[str, Any] = {"stream": stream, **args}
        if correlation is not None:
            event_args["correlation"] = correlation
        self.events.append(
            {
                "ph": "X",
                "cat": category,
                "name": name,
                "pid": GPU_PID,
                "tid": stream,
                "ts": ts,
                "dur": dur,
                "args": event_args,
            }
        )
        return self

    def launch(
        self,
        kernel: str,
        launch_ts: float,
        launch_dur: float,
        kernel_ts: float,
        kernel_dur: float,
        *,
        tid: int = 1,
        stream: int = 7,
        category: str = "kernel",
        **args: Any,
    ) -> int:
        """A cudaLaunchKernel on ``tid`` and the GPU event it launched; returns the correlation."""
        correlation = self.runtime("cudaLaunchKernel", launch_ts, launch_dur, tid=tid)
        self.gpu(
            kernel,
            kernel_ts,
            kernel_dur,
            correlation=correlation,
            stream=stream,
            category=category,
            **args,
        )
        return correlation

    def add(self, **event: Any) -> TraceBuilder:
        self.events.append(event)
        return self

    def document(self) -> dict[str, Any]:
        return {**self.metadata, "traceEvents": self.events}

    def write(self, path: Path) -> Path:
        text = json.dumps(self.document(), indent=1).encode()
        if path.name.endswith(".gz"):
            path.write_bytes(gzip.compress(text))
        else:
            path.write_bytes(text)
        return path


def record_torch_trace(path: Path) -> Path:
    """Profile a small CPU workload with torch.profiler, with nested record_function markers.

    torch.profiler records the thread that started it, so markers on several threads are
    covered by hand-made traces and the shared real ones instead.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    layer = torch.nn.Linear(128, 128)
    inputs = torch.randn(32, 128)
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(3):
            with record_function("model.forward"):
                with record_function("model.linear"):
                    hidden = layer(inputs)
                with record_function("model.activation"):
                    torch.relu(hidden).sum()
    profiler.export_chrome_trace(str(path))
    return path

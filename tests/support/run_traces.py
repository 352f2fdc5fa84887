"""Real traces of a run of several processes, merged into the shape ``ncompass run`` writes.

:func:`record_run` starts real Python processes, each recording itself with the real torch
profiler and ``record_function`` markers: ``rank 0`` starts ``rank 1``, which starts its
``DataLoader worker 0`` (a process that states no rank). :func:`merge_run` combines their
traces as a followed run's merged trace does: every process keeps its OS pid, one
``process_name`` event per process names its role, ``ncompass_processes`` lists them (root
first), and each per-process trace gets its ``ncompass_process`` key. (The real merger lives
in ``ncompass run``; this stands in for it so the analysis can be tested on its own.)
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

_ID_STRIDE = 10**12

# One process of the run: starts its child (if any), records its steps, waits for the child.
_PROCESS_SCRIPT = r"""
import json, os, subprocess, sys

out, plan = sys.argv[1], json.loads(sys.argv[2])
me, children = plan[0], plan[1:]
# the child starts first, so that the processes import torch side by side
child = (
    subprocess.Popen([sys.executable, __file__, out, json.dumps(children)]) if children else None
)
import torch
from torch.profiler import ProfilerActivity, profile, record_function

torch.set_num_threads(1)
torch.manual_seed(0)
matrix = torch.randn(96, 96)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(me["steps"]):
        with record_function(me["marker"]):
            for _ in range(me["work"]):
                (matrix @ matrix).sum()
if child is not None and child.wait() != 0:
    sys.exit(child.returncode)
path = os.path.join(out, f"{me['name']}.json")
prof.export_chrome_trace(path)
identity = {"pid": os.getpid(), "ppid": os.getppid(), "rank": me["rank"], "role": me["role"],
            "command": " ".join([sys.executable, *sys.argv[:1]])}
with open(path + ".identity", "w") as stream:
    json.dump(identity, stream)
"""


def default_plan(rank1_work: int = 40) -> list[dict[str, Any]]:
    """rank 0 -> rank 1 -> rank 1's DataLoader worker 0: each starts the next (the chain of
    parents the report groups by). ``rank1_work`` sets how slow rank 1's steps are."""
    return [
        {"name": "rank0", "role": "rank 0", "rank": 0, "marker": "train_step", "steps": 3,
         "work": 10},
        {"name": "rank1", "role": "rank 1", "rank": 1, "marker": "train_step", "steps": 3,
         "work": rank1_work},
        {"name": "worker", "role": "DataLoader worker 0", "rank": None, "marker": "load_batch",
         "steps": 4, "work": 5},
    ]  # fmt: skip


def record_run(directory: Path, plan: list[dict[str, Any]] | None = None) -> list[Path]:
    """Run the processes of ``plan`` (each the parent of the next) and return their traces,
    in the plan's order (root first), each with its ``ncompass_process`` key."""
    return record_runs([(directory, plan if plan is not None else default_plan())])[0]


def record_runs(runs: list[tuple[Path, list[dict[str, Any]]]]) -> list[list[Path]]:
    """:func:`record_run` for several runs at once (their processes run side by side)."""
    started = []
    for directory, plan in runs:
        directory.mkdir(parents=True, exist_ok=True)
        script = directory / "process.py"
        script.write_text(_PROCESS_SCRIPT)
        command = [sys.executable, str(script), str(directory), orjson.dumps(plan).decode()]
        started.append(subprocess.Popen(command, env={**os.environ, "PYTHONHASHSEED": "0"}))
    for process in started:
        if process.wait(timeout=900) != 0:
            raise RuntimeError(f"recording a run failed with exit code {process.returncode}")
    recorded = []
    for directory, plan in runs:
        paths = [directory / f"{process['name']}.json" for process in plan]
        for path in paths:
            identity = orjson.loads(Path(f"{path}.identity").read_bytes())
            trace = orjson.loads(path.read_bytes())
            trace["ncompass_process"] = identity
            path.write_bytes(orjson.dumps(trace))
        recorded.append(paths)
    return recorded


def load_trace(path: Path) -> dict[str, Any]:
    """A trace file (``.json`` or gzip-compressed) as one dict."""
    data = path.read_bytes()
    return orjson.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)  # type: ignore[no-any-return]


def with_identity(source: Path, output: Path, identity: dict[str, Any]) -> Path:
    """Copy a trace, adding the ``ncompass_process`` key a followed process writes."""
    trace = load_trace(source)
    trace["ncompass_process"] = identity
    output.write_bytes(orjson.dumps(trace))
    return output


def merge_run(paths: list[Path], output: Path) -> Path:
    """Merge per-process traces (root first) into one run trace of the contract's shape."""
    traces = [load_trace(path) for path in paths]
    bases = [trace.get("baseTimeNanoseconds") for trace in traces]
    aligned = all(isinstance(base, int) for base in bases)
    earliest = min(bases) if aligned else 0
    events: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []
    for position, (path, trace, base) in enumerate(zip(paths, traces, bases, strict=True)):
        identity = trace["ncompass_process"]
        shift_us = ((base or 0) - earliest) / 1000.0 if aligned else 0.0
        offset = position * _ID_STRIDE
        markers = 0
        for event in trace["traceEvents"]:
            if event.get("ph") == "M" and event.get("name") == "process_name":
                continue  # replaced by the role below
            event = dict(event)
            if "ts" in event and shift_us:
                event["ts"] = float(event["ts"]) + shift_us
            if isinstance(event.get("id"), int):
                event["id"] += offset
            args = event.get("args")
            if isinstance(args, dict) and isinstance(args.get("correlation"), int):
                event["args"] = {**args, "correlation": args["correlation"] + offset}
            markers += event.get("cat") == "user_annotation"
            events.append(event)
        events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": identity["pid"],
                "tid": 0,
                "args": {"name": identity["role"]},
            }
        )
        processes.append(
            {
                **identity,
                "exit_code": 0,
                "trace_file": path.name,
                "markers": markers,
            }
        )
    merged: dict[str, Any] = {"schemaVersion": traces[0].get("schemaVersion", 1)}
    if aligned:
        merged["baseTimeNanoseconds"] = earliest
    merged["traceEvents"] = events
    merged["ncompass_processes"] = processes
    output.write_bytes(orjson.dumps(merged))
    return output


__all__ = [
    "default_plan",
    "load_trace",
    "merge_run",
    "record_run",
    "record_runs",
    "with_identity",
]

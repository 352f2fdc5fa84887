"""``merge_processes``: the traces of one run's processes on one timeline, real pids kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ncompass.errors import TraceError
from ncompass.traces.processes import ProcessTrace, merge_processes


def _write(path: Path, pid: int, base_ns: int, events: list[dict[str, Any]]) -> Path:
    labels = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}]
    document = {"baseTimeNanoseconds": base_ns, "traceEvents": labels + events}
    path.write_text(json.dumps(document))
    return path


def test_each_process_keeps_its_pid_and_is_named_by_its_role(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "1.json",
        100,
        1_000_000_000,
        [
            {"ph": "X", "name": "work", "pid": 100, "tid": 7, "ts": 10.0, "dur": 5.0},
            {"ph": "s", "name": "flow", "pid": 100, "tid": 7, "ts": 11.0, "id": 3},
        ],
    )
    child = _write(
        tmp_path / "2.json",
        200,
        1_002_000_000,  # its clock starts 2 ms later
        [
            {"ph": "X", "name": "work", "pid": 200, "tid": 8, "ts": 10.0, "dur": 5.0},
            {"ph": "s", "name": "flow", "pid": 200, "tid": 8, "ts": 11.0, "id": 3},
            {"ph": "X", "name": "k", "pid": 200, "tid": 8, "ts": 12.0, "args": {"correlation": 3}},
        ],
    )
    listing = [{"pid": 100, "role": "main.py"}, {"pid": 200, "role": "rank 1"}]
    merged = merge_processes(
        [ProcessTrace(root, 100, "main.py"), ProcessTrace(child, 200, "rank 1")],
        tmp_path / "run.json",
        metadata={"ncompass_processes": listing},
    )
    document = json.loads(merged.read_text())
    assert document["ncompass_processes"] == listing
    assert document["baseTimeNanoseconds"] == 1_000_000_000
    events = document["traceEvents"]
    work = {e["pid"]: e for e in events if e.get("name") == "work"}
    assert work[100]["ts"] == 10.0 and work[200]["ts"] == 2010.0  # one clock
    flows = sorted(e["id"] for e in events if e.get("name") == "flow")
    assert flows[0] == 3 and flows[1] != 3  # links never cross processes
    (kernel,) = [e for e in events if e.get("name") == "k"]
    assert kernel["args"]["correlation"] == flows[1]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {100: "main.py", 200: "rank 1"}


def test_a_corrupt_process_trace_is_named(tmp_path: Path) -> None:
    root = _write(tmp_path / "1.json", 100, 0, [])
    broken = tmp_path / "2.json"
    broken.write_text('{"traceEvents": [')
    with pytest.raises(TraceError, match=r"2\.json"):
        merge_processes(
            [ProcessTrace(root, 100, "main"), ProcessTrace(broken, 200, "child")],
            tmp_path / "run.json",
        )
    assert not (tmp_path / "run.json").exists()

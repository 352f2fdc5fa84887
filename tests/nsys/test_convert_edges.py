"""``convert_report`` on unusual and broken inputs, and its memory on large reports."""

from __future__ import annotations

import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from ncompass.errors import TraceError
from ncompass.traces.nsys import convert_report
from tests.nsys.report_builder import ReportBuilder, global_tid
from tests.nsys.trace_checks import assert_viewer_nesting, load_trace, only


def test_missing_report_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.sqlite: no such report"):
        convert_report(tmp_path / "nope.sqlite", tmp_path / "out.json")


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("just some words, certainly not a database header " * 40)
    with pytest.raises(TraceError, match=r"notes\.sqlite: not an SQLite database"):
        convert_report(text, tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()


def test_an_sqlite_file_without_nsys_tables_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE people (name TEXT)")
    with pytest.raises(
        TraceError, match=r"other\.sqlite: not an Nsight Systems export.*nsys export"
    ):
        convert_report(other, tmp_path / "out.json")


def test_a_table_missing_a_needed_column_is_named(tmp_path: Path) -> None:
    odd = tmp_path / "odd.sqlite"
    with sqlite3.connect(odd) as db:
        db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER)")
    with pytest.raises(
        TraceError, match=r"table CUPTI_ACTIVITY_KIND_KERNEL lacks the column\(s\) deviceId"
    ):
        convert_report(odd, tmp_path / "out.json")


def test_an_nsys_rep_report_without_nsys_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"not read")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCOMPASS_NSYS", raising=False)
    with pytest.raises(TraceError) as caught:
        convert_report(report, tmp_path / "run.json")
    message = str(caught.value)
    assert "run.nsys-rep" in message and "install Nsight Systems" in message
    assert "nsys export --type sqlite -o run.sqlite run.nsys-rep" in message


def test_an_old_export_with_few_tables_and_columns_still_converts(tmp_path: Path) -> None:
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as db:
        db.execute(
            "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, "
            "eventType INTEGER NOT NULL, text TEXT, globalTid INTEGER)"
        )
        db.executemany(
            "INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?)",
            [
                (1000, 5000, 59, "outer", global_tid(7, 7)),
                (2000, 3000, 59, "inner", global_tid(7, 7)),
                (2500, None, 34, "mark", global_tid(7, 7)),
            ],
        )
    result = convert_report(old, tmp_path / "old.json")
    events = load_trace(result.output)["traceEvents"]
    assert only(events, "inner", "user_annotation")["dur"] == 1.0
    assert (result.stats.nvtx_ranges, result.stats.nvtx_marks) == (2, 1)


def test_nvtxt_ranges_and_machine_bits_in_ids(tmp_path: Path) -> None:
    builder = ReportBuilder(tmp_path / "remote.sqlite", session_start_ns=None)
    machine = 3  # a second host of a multi-node report: bits above the pid
    builder.process(9, "worker", machine=machine)
    builder.db.execute("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (70, 'NvtxtPushPopRange', '')")
    builder.db.execute(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 70, ?, ?)",
        (100, 900, "imported", global_tid(9, 9, machine)),
    )
    correlation = builder.call(9, 9, 200, 300, machine=machine)
    builder.kernel(9, correlation, 400, 500, "k", machine=machine)
    result = convert_report(builder.close(), tmp_path / "remote.json")
    events = load_trace(result.output)["traceEvents"]
    imported = only(events, "imported", "user_annotation")
    assert (imported["pid"], imported["tid"]) == (9, 9)
    assert imported["args"]["gpu_ops"] == 1
    assert "baseTimeNanoseconds" not in load_trace(result.output)


def test_a_graph_launch_links_every_kernel_it_ran(tmp_path: Path) -> None:
    builder = ReportBuilder(tmp_path / "graph.sqlite")
    builder.push_pop(3, 3, 0, 10_000, "replay")
    graph = builder.call(3, 3, 100, 200, "cudaGraphLaunch_v10000")
    for index, start in enumerate((1_000, 2_000, 3_000)):  # one launch, three kernels
        builder.kernel(3, graph, start, start + 500, f"node{index}")
    result = convert_report(builder.close(), tmp_path / "graph.json")
    events = load_trace(result.output)["traceEvents"]
    replay = only(events, "replay", "user_annotation")
    assert (replay["args"]["launches"], replay["args"]["gpu_ops"]) == (1, 3)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert {k["args"]["nvtx_range"] for k in kernels} == {"replay"}
    assert {k["args"]["correlation"] for k in kernels} == {graph}
    (head,) = [e for e in events if e.get("ph") == "f"]  # one arrow, to the first kernel
    assert head["ts"] == 1.0


def test_a_progress_bar_can_be_asked_for(tmp_path: Path) -> None:
    report = _many_steps(tmp_path / "steps.sqlite", 20)
    shown = convert_report(report, tmp_path / "shown.json", progress=True)
    quiet = convert_report(report, tmp_path / "quiet.json", progress=False)
    assert shown.stats == quiet.stats
    assert (tmp_path / "shown.json").read_bytes() == (tmp_path / "quiet.json").read_bytes()


def _many_steps(path: Path, steps: int) -> Path:
    builder = ReportBuilder(path)
    for step in range(steps):
        base = step * 10_000
        builder.push_pop(1, 1, base, base + 9_000, "step")
        builder.push_pop(1, 1, base + 100, base + 8_000, "forward")
        for k in range(3):
            start = base + 200 + k * 1_000
            correlation = builder.call(1, 1, start, start + 100)
            # consecutive kernels overlap a little, as they do on real GPUs
            builder.kernel(1, correlation, start + 500, start + 1_600, f"k{k}")
    return builder.close()


def test_memory_does_not_grow_with_the_report(tmp_path: Path) -> None:
    # both larger than what the cursors fetch at a time, so both measure the steady state
    small = _many_steps(tmp_path / "small.sqlite", 1_000)
    large = _many_steps(tmp_path / "large.sqlite", 4_000)
    peaks = []
    for report in (small, large):
        tracemalloc.start()
        result = convert_report(report, tmp_path / f"{report.stem}.json.gz")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert result.stats.kernels == (1_000 if report is small else 4_000) * 3
    assert peaks[1] < peaks[0] * 1.3, f"peak Python memory {peaks}: grows with the report"
    events = load_trace(tmp_path / "large.json.gz")["traceEvents"]
    assert_viewer_nesting(events)

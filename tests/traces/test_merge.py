from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from ncompass.errors import TraceError
from ncompass.traces.merge import merge_traces
from ncompass.traces.processes import ProcessTrace, merge_processes
from ncompass.traces.reader import TraceReader
from tests.traces.builders import TraceBuilder, shared_trace


def rank_trace(tmp_path: Path, rank: int, base_ns: int | None, marker_ts: float) -> Path:
    builder = TraceBuilder()
    builder.metadata["distributedInfo"] = {"rank": rank}
    if base_ns is not None:
        builder.metadata["baseTimeNanoseconds"] = base_ns
    builder.add(ph="M", name="process_name", pid=100, tid=0, args={"name": "python"})
    builder.add(ph="M", name="thread_name", pid=100, tid=1, args={"name": "main"})
    builder.marker("step", marker_ts, 10)
    builder.launch("k", marker_ts + 1, 1, marker_ts + 5, 2)
    builder.add(ph="s", id=1, pid=100, tid=1, ts=marker_ts + 1, cat="ac2g", name="ac2g")
    return builder.write(tmp_path / f"rank{rank}.json")


def test_ranks_become_processes_aligned_on_base_time(tmp_path: Path) -> None:
    first = rank_trace(tmp_path, 1, base_ns=2_000_000, marker_ts=100.0)  # starts 2000 µs later
    second = rank_trace(tmp_path, 0, base_ns=0, marker_ts=100.0)
    out = merge_traces([first, second], tmp_path / "merged.json")
    document = json.loads(out.read_text())
    assert document["baseTimeNanoseconds"] == 0
    events = document["traceEvents"]
    steps = {e["pid"]: e["ts"] for e in events if e.get("name") == "step"}
    assert steps == {1: 2100.0, 0: 100.0}
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert processes == {0: "rank 0", 1: "rank 1"}
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert "python · main" in threads and "pid 0 · thread 7" in threads
    correlations = [e["args"]["correlation"] for e in events if e.get("cat") == "kernel"]
    assert len(set(correlations)) == 2  # made unique per rank
    flow_ids = [e["id"] for e in events if e.get("ph") == "s"]
    assert len(set(flow_ids)) == 2


def test_without_base_time_timestamps_stay_absolute(tmp_path: Path) -> None:
    first = rank_trace(tmp_path, 0, base_ns=None, marker_ts=5.0)
    second = rank_trace(tmp_path, 1, base_ns=None, marker_ts=7.0)
    out = merge_traces([first, second], tmp_path / "merged.json.gz")
    steps = sorted(e["ts"] for e in TraceReader(out) if e.get("name") == "step")
    assert steps == [5.0, 7.0]


def test_duplicate_ranks_are_refused(tmp_path: Path) -> None:
    first = rank_trace(tmp_path, 0, None, 1.0)
    with pytest.raises(TraceError, match="both rank 0"):
        merge_traces([first, first], tmp_path / "m.json")


def test_shared_two_rank_job_merges_into_one_valid_trace(tmp_path: Path) -> None:
    ranks = [shared_trace("trace_filter").with_name(f"sampled_rank-{n}.json.gz") for n in (0, 1)]
    out = merge_traces(ranks, tmp_path / "merged.json.gz")
    merged = json.loads(gzip.decompress(out.read_bytes()))
    originals = [json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] for path in ranks]
    non_metadata = sum(1 for events in originals for e in events if e.get("ph") != "M")
    assert sum(1 for e in merged["traceEvents"] if e["ph"] != "M") == non_metadata
    assert {e["pid"] for e in merged["traceEvents"]} == {0, 1}


def test_small_ranks_merge_in_this_process_when_no_jobs_are_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranks = [shared_trace("trace_filter").with_name(f"sampled_rank-{n}.json.gz") for n in (0, 1)]
    expected = merge_traces(ranks, tmp_path / "one.json", jobs=1).read_bytes()

    def no_workers(*args: object, **kwargs: object) -> None:
        raise AssertionError("workers were started for two 120 kB ranks")

    monkeypatch.setattr("ncompass.traces.merge.map_traces", no_workers)
    assert merge_traces(ranks, tmp_path / "default.json", jobs=None).read_bytes() == expected


def test_empty_traces_merge_into_an_empty_valid_trace(tmp_path: Path) -> None:
    source = tmp_path / "empty.json"
    source.write_text('{"traceEvents": []}')
    document = json.loads(merge_traces([source], tmp_path / "m.json").read_text())
    assert [e["name"] for e in document["traceEvents"]] == ["process_name", "process_sort_index"]


def test_no_input_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="at least one trace"):
        merge_traces([], tmp_path / "m.json")


def followed_rank_trace(tmp_path: Path, rank: int, pids: tuple[int, int]) -> Path:
    """What one rank of `ncompass submit` writes when its script starts a `spawn` worker: its
    own trace and the worker's, merged as `ncompass run` merges the processes it followed."""
    roles = (f"rank {rank}", f"rank {rank} · SpawnProcess-1")
    traces = []
    for pid, role, calls in zip(pids, roles, (1, 3), strict=True):
        builder = TraceBuilder()
        builder.metadata["baseTimeNanoseconds"] = 1_000_000
        builder.metadata["ncompass_process"] = {"pid": pid, "rank": rank, "role": role}
        builder.add(ph="M", name="process_name", pid=pid, tid=0, args={"name": "python"})
        builder.add(ph="M", name="thread_name", pid=pid, tid=pid, args={"name": "MainThread"})
        for call in range(calls):
            builder.add(ph="X", cat="user_annotation", name="step", pid=pid, tid=pid,
                        ts=10.0 * call, dur=5.0, args={})  # fmt: skip
        traces.append(ProcessTrace(builder.write(tmp_path / f"{pid}.json"), pid, role))
    processes = [
        {"pid": pid, "ppid": 1, "rank": rank, "role": role}
        for pid, role in zip(pids, roles, strict=True)
    ]
    return merge_processes(
        traces, tmp_path / f"job-rank{rank}.json", metadata={"ncompass_processes": processes}
    )


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_workers_of_a_rank_keep_tracks_of_their_own(tmp_path: Path, jobs: int) -> None:
    # the same OS pids in both ranks (two nodes): the tracks still do not mix
    ranks = [followed_rank_trace(tmp_path, rank, (300, 301)) for rank in (1, 0)]
    out = merge_traces(ranks, tmp_path / "merged.json", jobs=jobs)
    document = json.loads(out.read_text())
    assert [entry["rank"] for entry in document["mergedRanks"]] == [1, 0]  # as the traces say
    assert [entry["processes"] for entry in document["mergedRanks"]] == [
        [{"pid": 1_000_000, "os_pid": 301, "role": "rank 1 · SpawnProcess-1"}],
        [{"pid": 1_000_001, "os_pid": 301, "role": "rank 0 · SpawnProcess-1"}],
    ]
    events = document["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {
        0: "rank 0",
        1: "rank 1",
        1_000_000: "rank 1 · SpawnProcess-1",
        1_000_001: "rank 0 · SpawnProcess-1",
    }
    steps = Counter(e["pid"] for e in events if e.get("name") == "step")
    assert steps == {0: 1, 1: 1, 1_000_000: 3, 1_000_001: 3}
    sort = {
        e["pid"]: e["args"]["sort_index"] for e in events if e.get("name") == "process_sort_index"
    }
    assert sort == {0: 0, 1: 1, 1_000_000: 1, 1_000_001: 0}  # each worker with its rank
    threads = {(e["pid"], e["args"]["name"]) for e in events if e.get("name") == "thread_name"}
    assert threads == {
        (0, "rank 0 · MainThread"),
        (1, "rank 1 · MainThread"),
        (1_000_000, "MainThread"),
        (1_000_001, "MainThread"),
    }

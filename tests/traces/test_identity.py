"""One function decides who recorded a trace: rank, process, role."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from ncompass.errors import TraceError
from ncompass.traces import link_trace
from ncompass.traces.identity import RankOwners, run_processes, trace_identity
from ncompass.traces.merge import merge_traces

_NCCL = Path("/work/shared/traces/hta/nccl_parser_config/nccl_data.json.gz")


def test_ncompass_process_rank_comes_before_distributed_info() -> None:
    identity = trace_identity(
        {
            "distributedInfo": {"rank": 3},
            "ncompass_process": {"pid": 10, "ppid": 1, "rank": 5, "role": "rank 5", "command": "x"},
        }
    )
    assert (identity.rank, identity.pid, identity.ppid, identity.role) == (5, 10, 1, "rank 5")


def test_a_worker_without_rank_falls_back_to_distributed_info_then_position() -> None:
    worker = {"ncompass_process": {"pid": 11, "rank": None, "role": "DataLoader worker 0"}}
    assert trace_identity(worker).rank is None and trace_identity(worker).rank_or(4) == 4
    assert trace_identity({**worker, "distributedInfo": {"rank": 2}}).rank_or(4) == 2
    assert trace_identity({"distributedInfo": {"rank": True}}).rank_or(1) == 1  # not a number


def test_run_processes_reads_the_list_root_first_and_skips_what_it_cannot_use() -> None:
    metadata = {
        "ncompass_processes": [
            {"pid": 1, "ppid": None, "rank": None, "role": "", "command": "torchrun t.py"},
            {"pid": 2, "ppid": 1, "rank": 0, "role": "rank 0", "command": "t.py", "markers": 5},
            {"pid": 5, "ppid": 1, "rank": 1, "role": "rank 1", "markers": ["a", "b"]},
            {"pid": "3"},
            "not an entry",
            {"pid": 2, "role": "duplicate"},
            {"pid": 4, "ppid": 2},
        ]
    }
    processes = run_processes(metadata)
    assert [(p.pid, p.role, p.rank, p.markers) for p in processes] == [
        (1, "torchrun t.py", None, 0),
        (2, "rank 0", 0, 5),
        (5, "rank 1", 1, 2),
        (4, "pid 4", None, 0),
    ]
    assert run_processes({}) == [] and run_processes({"ncompass_processes": {}}) == []


def test_a_rank_claimed_twice_is_one_error_naming_both_files() -> None:
    owners = RankOwners()
    owners.claim(0, "a.json")
    owners.claim(1, "b.json")
    with pytest.raises(TraceError, match=r"c.json and a.json are both rank 0"):
        owners.claim(0, "c.json")


@pytest.mark.skipif(not _NCCL.is_file(), reason="the shared HTA traces are not on this machine")
def test_merge_and_link_read_the_rank_a_followed_process_wrote(tmp_path: Path) -> None:
    trace = orjson.loads(gzip.decompress(_NCCL.read_bytes()))
    assert trace["distributedInfo"]["rank"] == 0
    trace["ncompass_process"] = {"pid": 7, "ppid": 1, "rank": 1, "role": "rank 1"}
    relabelled = tmp_path / "rank1.json"
    relabelled.write_bytes(orjson.dumps(trace))
    assert link_trace(relabelled).rank == 1
    merged = merge_traces([_NCCL, relabelled], tmp_path / "merged.json")
    header = orjson.loads(merged.read_bytes())
    assert [entry["rank"] for entry in header["mergedRanks"]] == [0, 1]
    with pytest.raises(TraceError, match="both rank 0"):
        merge_traces([_NCCL, _NCCL], tmp_path / "twice.json")


def test_a_run_of_one_rank_and_its_workers_is_that_rank() -> None:
    # the merged trace of one rank of `ncompass submit` whose script started a worker
    rank_and_worker = {
        "ncompass_processes": [
            {"pid": 20, "ppid": 1, "rank": 3, "role": "rank 3"},
            {"pid": 21, "ppid": 20, "rank": 3, "role": "rank 3 · SpawnProcess-1"},
            {"pid": 22, "ppid": 21, "rank": None, "role": "python helper.py"},
        ]
    }
    assert trace_identity(rank_and_worker).rank_or(0) == 3
    # a launcher (no rank) or processes of several ranks: the file is no one rank
    torchrun = {
        "ncompass_processes": [
            {"pid": 1, "rank": None, "role": "torchrun"},
            {"pid": 2, "ppid": 1, "rank": 0, "role": "rank 0"},
        ]
    }
    assert trace_identity(torchrun).rank is None
    nested = {
        "ncompass_processes": [
            {"pid": 1, "rank": 0, "role": "rank 0"},
            {"pid": 2, "ppid": 1, "rank": 1, "role": "rank 1"},
        ]
    }
    assert trace_identity(nested).rank is None

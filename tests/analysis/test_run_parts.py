"""Processes of a run grouped under their rank: workers are not ranks."""

from __future__ import annotations

from ncompass.analysis.run_parts import ranks_of_processes
from ncompass.traces.identity import RunProcess, run_processes


def _processes(*entries: tuple[int, int | None, int | None, str]) -> list[RunProcess]:
    return run_processes(
        {
            "ncompass_processes": [
                {"pid": pid, "ppid": ppid, "rank": rank, "role": role, "command": role}
                for pid, ppid, rank, role in entries
            ]
        }
    )


def test_a_worker_is_under_its_nearest_ranked_ancestor_and_a_launcher_under_none() -> None:
    processes = _processes(
        (100, 1, None, "torchrun"),
        (101, 100, 0, "rank 0"),
        (102, 100, 1, "rank 1"),
        (103, 102, None, "DataLoader worker 0"),
        (104, 103, None, "a process the worker started"),
        (105, 102, 1, "a worker that inherited RANK"),
    )
    assert ranks_of_processes(processes) == {
        100: None,
        101: 0,
        102: 1,
        103: 1,
        104: 1,
        105: 1,
    }


def test_a_parent_loop_or_an_unknown_parent_ends_the_walk() -> None:
    processes = _processes((1, 2, None, "a"), (2, 1, None, "b"), (3, 99, None, "orphan"))
    assert ranks_of_processes(processes) == {1: None, 2: None, 3: None}

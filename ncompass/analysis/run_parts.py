"""A run's merged trace cut into its processes, and its processes grouped under their ranks.

Processes are grouped under their rank: a process that states none (a DataLoader worker, a
compile worker) is under its nearest ancestor's, so workers are never ranks of their own; a
process with no ranked ancestor (a launcher such as ``torchrun``) is under no rank.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ncompass.traces.identity import RunProcess, run_processes
from ncompass.traces.link import NO_LINK, LinkedTrace
from ncompass.traces.process_parts import trace_of_processes


@dataclass(frozen=True)
class ProcessPart:
    """One process of a run and the part of the run's trace it recorded.

    Attributes:
        process: The process, as the run lists it.
        under_rank: The rank it is reported under (its own, else its nearest ancestor's).
        trace: Its part of the run's linked trace.
        alone_in_rank: It is the only process under its rank, so its part is the rank's part
            (:func:`rank_parts` with ``skip_alone`` leaves that rank out).
    """

    process: RunProcess
    under_rank: int | None
    trace: LinkedTrace
    alone_in_rank: bool = False


def is_run_trace(trace: LinkedTrace) -> bool:
    """Whether ``trace`` is a run's merged trace of more than one process."""
    return len(run_processes(trace.metadata)) > 1


def ranks_of_processes(processes: Sequence[RunProcess]) -> dict[int, int | None]:
    """Each process's pid -> the rank it is reported under: its own, else the nearest
    ancestor's that states one (None: no rank above it, such as a launcher)."""
    by_pid = {process.pid: process for process in processes}
    under: dict[int, int | None] = {}
    for process in processes:
        seen: set[int] = set()
        current: RunProcess | None = process
        while current is not None and current.rank is None and current.pid not in seen:
            seen.add(current.pid)
            current = by_pid.get(current.ppid) if current.ppid is not None else None
        under[process.pid] = current.rank if current is not None else None
    return under


def process_parts(trace: LinkedTrace) -> Iterator[ProcessPart]:
    """Each process of a run's linked trace with its part, in the run's order (root first);
    one part at a time, so that at most one copy of a process's columns is held."""
    processes = run_processes(trace.metadata)
    under = ranks_of_processes(processes)
    sizes = Counter(under.values())
    for process in processes:
        rank = under[process.pid]
        part = trace_of_processes(trace, [process.pid])
        yield ProcessPart(process, rank, part, rank is not None and sizes[rank] == 1)


def rank_parts(
    trace: LinkedTrace, *, skip_alone: bool = False
) -> Iterator[tuple[int, tuple[str, ...], LinkedTrace]]:
    """Each rank of a run's linked trace, in rank order: ``(rank, roles of its processes,
    the part they recorded)``; nothing when no process states a rank. With ``skip_alone``,
    only the ranks of more than one process (the others' parts are their process's)."""
    processes = run_processes(trace.metadata)
    under = ranks_of_processes(processes)
    for rank in sorted({rank for rank in under.values() if rank is not None}):
        members = [process for process in processes if under[process.pid] == rank]
        if skip_alone and len(members) == 1:
            continue
        part = trace_of_processes(trace, [process.pid for process in members])
        yield rank, tuple(process.role for process in members), part


def wall_us(trace: LinkedTrace) -> float:
    """A part's CPU span: from its first marker or launch to its last (0 without any)."""
    return trace.cpu_end - trace.cpu_start if trace.cpu_end > trace.cpu_start else 0.0


def marker_cpu_us(trace: LinkedTrace) -> float:
    """CPU time inside a trace's outermost markers (nested ones are not counted twice)."""
    return sum((marker.duration for marker in trace.markers if marker.parent == NO_LINK), 0.0)


__all__ = [
    "ProcessPart",
    "is_run_trace",
    "marker_cpu_us",
    "process_parts",
    "rank_parts",
    "ranks_of_processes",
    "wall_us",
]

"""Who recorded a trace: its rank, its process and its role, decided in one place.

A trace names its rank in ``ncompass_process.rank`` (written by ``ncompass run`` in every process
it follows) or in Kineto's ``distributedInfo.rank``; a trace that names none takes the position
it was given at (the first file is rank 0). A run's merged trace also lists every process of
the run under ``ncompass_processes`` (root process first): each one's pid, parent pid, rank,
role (``rank 1``, ``DataLoader worker 0``, ``EngineCore``, else its command line), command,
exit code, trace file and markers placed. Such a trace is one rank when its root process states
that rank and no process in it states another (a rank of ``ncompass submit`` whose script
started workers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncompass.errors import TraceError

PROCESS_KEY = "ncompass_process"
"""Top-level key of a per-process trace: ``{"pid", "ppid", "rank", "role", "command"}``."""
PROCESSES_KEY = "ncompass_processes"
"""Top-level key of a run's merged trace: one entry per process, root process first."""


@dataclass(frozen=True)
class TraceIdentity:
    """Who recorded one trace file.

    Attributes:
        rank: The rank the trace names (``ncompass_process.rank``, else
            ``distributedInfo.rank``), or None.
        pid, ppid: The recording process and its parent (None when the trace does not say).
        role: ``rank 1``, ``DataLoader worker 0``, ``EngineCore``, a command line, or None.
        command: The process's command line, or None.
    """

    rank: int | None = None
    pid: int | None = None
    ppid: int | None = None
    role: str | None = None
    command: str | None = None

    def rank_or(self, position: int) -> int:
        """The rank the trace names, else ``position`` (its place among the files given)."""
        return self.rank if self.rank is not None else position


@dataclass(frozen=True)
class RunProcess:
    """One process of a run, as the run's merged trace lists it under ``ncompass_processes``.

    Attributes:
        pid, ppid: The process and its parent.
        rank: Its rank (None for a process that is no rank, or does not know it).
        role: How the report names it (``rank 1``, ``DataLoader worker 0``, a command line).
        command: Its command line.
        exit_code: How it ended (None when not known).
        trace_file: Its own trace, kept beside the run's (None when it wrote none).
        markers: Markers placed in it (a count; a list of their names counts its length).
    """

    pid: int
    ppid: int | None
    rank: int | None
    role: str
    command: str
    exit_code: int | None = None
    trace_file: str | None = None
    markers: int = 0


def trace_identity(metadata: Mapping[str, Any]) -> TraceIdentity:
    """Who recorded a trace, from its top-level keys (``TraceReader.metadata``).

    Args:
        metadata: The trace's top-level keys other than ``traceEvents``.

    Returns:
        The identity; fields the trace does not state are None.
    """
    process = metadata.get(PROCESS_KEY)
    process = process if isinstance(process, Mapping) else {}
    rank = _integer(process.get("rank"))
    if rank is None:
        rank = _rank_of_run(metadata)
    if rank is None:
        info = metadata.get("distributedInfo")
        rank = _integer(info.get("rank")) if isinstance(info, Mapping) else None
    return TraceIdentity(
        rank=rank,
        pid=_integer(process.get("pid")),
        ppid=_integer(process.get("ppid")),
        role=_text(process.get("role")),
        command=_text(process.get("command")),
    )


def run_processes(metadata: Mapping[str, Any]) -> list[RunProcess]:
    """The processes a run's merged trace lists (``ncompass_processes``), root first.

    Entries without an integer pid are left out; a missing role falls back to the command
    line, then to ``pid N``.

    Args:
        metadata: The trace's top-level keys other than ``traceEvents``.

    Returns:
        The processes; empty for a trace that is not a run's merged trace.
    """
    listed = metadata.get(PROCESSES_KEY)
    if not isinstance(listed, list):
        return []
    processes: list[RunProcess] = []
    seen: set[int] = set()
    for entry in listed:
        if not isinstance(entry, Mapping):
            continue
        pid = _integer(entry.get("pid"))
        if pid is None or pid in seen:
            continue
        seen.add(pid)
        command = _text(entry.get("command")) or ""
        markers = entry.get("markers")
        placed = len(markers) if isinstance(markers, list) else _integer(markers)
        processes.append(
            RunProcess(
                pid=pid,
                ppid=_integer(entry.get("ppid")),
                rank=_integer(entry.get("rank")),
                role=_text(entry.get("role")) or command or f"pid {pid}",
                command=command,
                exit_code=_integer(entry.get("exit_code")),
                trace_file=_text(entry.get("trace_file")),
                markers=placed if placed is not None else 0,
            )
        )
    return processes


def _rank_of_run(metadata: Mapping[str, Any]) -> int | None:
    """The rank of a run's merged trace: its root process's, when no process states another."""
    processes = run_processes(metadata)
    if not processes or processes[0].rank is None:
        return None
    rank = processes[0].rank
    return rank if all(p.rank in (None, rank) for p in processes) else None


class RankOwners:
    """The files claiming each rank: a second file claiming one is a :class:`TraceError`."""

    def __init__(self) -> None:
        self._owners: dict[int, str] = {}

    def claim(self, rank: int, path: str | Path) -> None:
        """Record that ``path`` is rank ``rank``.

        Raises:
            TraceError: Another file already is that rank.
        """
        owner = self._owners.get(rank)
        if owner is not None:
            raise TraceError(f"{path} and {owner} are both rank {rank}: pass one trace per rank")
        self._owners[rank] = str(path)


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


__all__ = [
    "PROCESSES_KEY",
    "PROCESS_KEY",
    "RankOwners",
    "RunProcess",
    "TraceIdentity",
    "run_processes",
    "trace_identity",
]

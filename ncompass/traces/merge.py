"""Merge per-rank traces into one timeline: one process per rank, clocks aligned.

Each rank becomes one process (named ``rank N``) whose threads are the rank's original CPU
threads and GPU streams, so Perfetto shows one group per rank. A rank's trace that is a run of
several processes (the rank's script started workers, which ``ncompass run`` followed) keeps each
worker on a process track of its own beside the rank's, named by its role (``rank 1 ·
SpawnProcess-1``). Timestamps are aligned on ``baseTimeNanoseconds`` when the traces have it
(Kineto then writes times relative to it). Flow ids and ``args.correlation`` are made unique per
rank so links never cross ranks.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from ncompass.errors import TraceError
from ncompass.overwrite_guard import refuse_overwriting_inputs, refuse_replacing
from ncompass.traces.events import Event, microseconds
from ncompass.traces.identity import RankOwners, run_processes, trace_identity
from ncompass.traces.parallel import map_traces, worker_count
from ncompass.traces.reader import TraceReader, read_metadata
from ncompass.traces.writer import TraceWriter

_ID_STRIDE = 10**12  # per-rank offset of flow ids and correlations
_THREADS_PER_RANK = 1_000_000
_WORKER_PIDS = 1_000_000  # the merged pids of workers' tracks count up from here (ranks: 0, 1, ...)


@dataclass(frozen=True)
class _Worker:
    """A process of a rank's run other than the rank's own: it keeps a track of its own."""

    pid: int  # in the merged trace
    os_pid: int  # in the rank's trace
    label: str


@dataclass
class _RankPlan:
    rank: int
    path: Path
    shift_us: float
    workers: dict[Any, _Worker] = field(default_factory=dict)  # by OS pid
    process_names: dict[Any, str] = field(default_factory=dict)
    thread_names: dict[tuple[Any, Any], str] = field(default_factory=dict)
    thread_ids: dict[tuple[Any, Any], int] = field(default_factory=dict)

    def merged_pid(self, pid: Any) -> int:
        """The track an event of ``pid`` goes to: a worker's own, else the rank's."""
        worker = self.workers.get(pid)
        return worker.pid if worker is not None else self.rank

    def thread_id(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        index = self.thread_ids.get(key)
        if index is None:
            index = self.thread_ids[key] = self.rank * _THREADS_PER_RANK + len(self.thread_ids)
        return index


def merge_traces(
    paths: Sequence[str | Path],
    output_path: str | Path,
    *,
    progress: bool | None = None,
    jobs: int | None = 1,
    replace: bool = True,
) -> Path:
    """Merge traces of several ranks into one trace file.

    Args:
        paths: One trace per rank. A trace's rank is the one it names (``ncompass_process``
            or ``distributedInfo``; see :func:`~ncompass.traces.identity.trace_identity`), else its
            position in ``paths``.
        output_path: Where to write (``.json`` or ``.json.gz``).
        progress: Progress bar on stderr (None: only on a terminal, for large files).
        jobs: Ranks rewritten at once in worker processes; None for one per core, 1 for one
            by one in this process. The file written is the same byte for byte either way.
        replace: Replace a file already at ``output_path`` (False: refuse, before reading).

    Returns:
        The path written.

    Raises:
        TraceError: A trace is missing or corrupt, two traces claim the same rank, or no trace
            was given.
        OutputIsInputError: ``output_path`` is one of ``paths``.
        OutputExistsError: ``output_path`` exists and ``replace`` is false (left unchanged).
    """
    if not paths:
        raise TraceError("merge needs at least one trace file")
    refuse_overwriting_inputs(output_path, paths)
    refuse_replacing(output_path, replace=replace)
    metadata = [read_metadata(path) for path in paths]
    plans = _plan(paths, metadata)
    header: dict[str, Any] = {"schemaVersion": metadata[0].get("schemaVersion", 1)}
    bases = [_base_time_ns(meta) for meta in metadata]
    if all(base is not None for base in bases):
        header["baseTimeNanoseconds"] = min(base for base in bases if base is not None)
    header["displayTimeUnit"] = "ms"
    header["mergedRanks"] = [_merged_rank(plan) for plan in plans]
    with TraceWriter(output_path, metadata=header) as writer:
        if worker_count(jobs, paths) <= 1:  # small inputs: starting workers costs more
            for plan in plans:
                for batch in TraceReader(plan.path, progress=progress).batches():
                    encoded = _encoded(plan, batch)
                    writer.write_encoded((b",\n".join(encoded),), len(encoded))
                writer.write_many(_labels(plan))
        else:
            # Workers rewrite and encode their ranks into fragments beside the output (same
            # disk); this process only copies them, in rank order, into the one file.
            with tempfile.TemporaryDirectory(
                prefix=".ncompass-merge-", dir=writer.path.parent
            ) as scratch:
                rewrite = partial(_rewrite_to_fragment, plans=plans, scratch=scratch)
                for rewritten in map_traces(rewrite, paths, jobs=jobs, progress=progress):
                    writer.write_encoded(_chunks(rewritten.fragment), rewritten.events)
                    writer.write_many(_labels(rewritten.plan))
    return Path(output_path)


@dataclass(frozen=True)
class _RewrittenRank:
    plan: _RankPlan  # with the threads and labels seen while rewriting
    fragment: Path  # the rank's rewritten events, encoded and joined by ",\n"
    events: int


def _rewrite_to_fragment(
    path: str | Path, position: int, progress: bool | None, *, plans: list[_RankPlan], scratch: str
) -> _RewrittenRank:
    """Rewrite one rank into an encoded fragment (runs in a worker process)."""
    plan = plans[position]
    fragment = Path(scratch) / f"{position}.part"
    events = 0
    with open(fragment, "wb") as out:
        for batch in TraceReader(plan.path, progress=progress).batches():
            encoded = _encoded(plan, batch)
            if encoded:
                out.write((b",\n" if events else b"") + b",\n".join(encoded))
                events += len(encoded)
    return _RewrittenRank(plan=plan, fragment=fragment, events=events)


def _chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with open(path, "rb") as stream:
        while chunk := stream.read(size):
            yield chunk


def _plan(paths: Sequence[str | Path], metadata: list[dict[str, Any]]) -> list[_RankPlan]:
    bases = [_base_time_ns(meta) for meta in metadata]
    aligned_on_base = all(base is not None for base in bases)
    earliest = min((base for base in bases if base is not None), default=0)
    plans: list[_RankPlan] = []
    owners = RankOwners()
    next_worker_pid = _WORKER_PIDS
    for position, (path, meta, base) in enumerate(zip(paths, metadata, bases, strict=True)):
        rank = trace_identity(meta).rank_or(position)
        owners.claim(rank, path)
        # With every rank relative to its own base, shift onto the earliest base; otherwise make
        # every timestamp absolute (a trace without a base already is).
        shift_ns = (base or 0) - earliest if aligned_on_base else (base or 0)
        plan = _RankPlan(rank=rank, path=Path(path), shift_us=shift_ns / 1000.0)
        for process in run_processes(meta)[1:]:  # the root process is the rank's own track
            role = process.role
            label = role if role.startswith("rank ") else f"rank {rank} · {role}"
            plan.workers[process.pid] = _Worker(next_worker_pid, process.pid, label)
            next_worker_pid += 1
        plans.append(plan)
    return plans


def _merged_rank(plan: _RankPlan) -> dict[str, Any]:
    """The header's entry for one rank: its file, and the tracks of its workers if any."""
    entry: dict[str, Any] = {"rank": plan.rank, "path": str(plan.path)}
    if plan.workers:
        entry["processes"] = [
            {"pid": worker.pid, "os_pid": worker.os_pid, "role": worker.label}
            for worker in plan.workers.values()
        ]
    return entry


def _base_time_ns(metadata: dict[str, Any]) -> int | None:
    base = metadata.get("baseTimeNanoseconds")
    return base if isinstance(base, int) and not isinstance(base, bool) else None


_THREAD_ID_TYPES = (int, float, str, type(None))


def _encoded(plan: _RankPlan, events: list[Event]) -> list[bytes]:
    """The rank's events rewritten onto the merged timeline, each encoded as JSON.

    Raises:
        TraceError: an event holds a value the merged trace cannot carry (naming the file).
    """
    try:
        return [orjson.dumps(event) for event in _rewrite(plan, events)]
    except orjson.JSONEncodeError as error:  # e.g. an integer beyond 64 bits
        raise TraceError(
            f"{plan.path}: cannot merge the trace: an event holds a value JSON output cannot "
            f"carry ({error}); fix or remove that event, or export the trace again"
        ) from None


def _rewrite(plan: _RankPlan, events: list[Event]) -> list[Event]:
    rewritten: list[Event] = []
    id_offset = plan.rank * _ID_STRIDE
    for event in events:
        pid, tid = event.get("pid"), event.get("tid")
        phase = event.get("ph")
        if not isinstance(pid, _THREAD_ID_TYPES) or not isinstance(tid, _THREAD_ID_TYPES):
            raise TraceError(
                f"{plan.path}: cannot merge the trace: an event (ph {phase!r}, name "
                f"{str(event.get('name'))[:80]!r}) has a pid or tid that is not a number or a "
                "string; fix or remove that event, or export the trace again"
            )
        if phase == "M":
            _remember_label(plan, event)
            continue  # replaced by the rank's own labels at the end
        copy = dict(event)
        copy["pid"] = plan.merged_pid(pid)
        copy["tid"] = plan.thread_id(pid, tid)
        if "ts" in copy and plan.shift_us:
            copy["ts"] = microseconds(copy["ts"]) + plan.shift_us
        if isinstance(copy.get("id"), int) and id_offset:
            copy["id"] = copy["id"] + id_offset
        args = copy.get("args")
        if isinstance(args, dict) and isinstance(args.get("correlation"), int) and id_offset:
            copy["args"] = {**args, "correlation": args["correlation"] + id_offset}
        rewritten.append(copy)
    return rewritten


def _remember_label(plan: _RankPlan, event: Event) -> None:
    args = event.get("args")
    label = args.get("name") if isinstance(args, dict) else None
    if not isinstance(label, str):
        return
    if event.get("name") == "process_name":
        plan.process_names[event.get("pid")] = label
    elif event.get("name") == "thread_name":
        plan.thread_names[(event.get("pid"), event.get("tid"))] = label


def _labels(plan: _RankPlan) -> list[Event]:
    labels: list[Event] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": plan.rank,
            "tid": 0,
            "args": {"name": f"rank {plan.rank}"},
        },
        {
            "ph": "M",
            "name": "process_sort_index",
            "pid": plan.rank,
            "tid": 0,
            "args": {"sort_index": plan.rank},
        },
    ]
    for worker in plan.workers.values():  # sorted with their rank
        labels += [
            {
                "ph": "M",
                "name": "process_name",
                "pid": worker.pid,
                "tid": 0,
                "args": {"name": worker.label},
            },
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": worker.pid,
                "tid": 0,
                "args": {"sort_index": plan.rank},
            },
        ]
    for order, ((pid, tid), thread) in enumerate(plan.thread_ids.items()):
        name = plan.thread_names.get((pid, tid), f"thread {tid}")
        if pid not in plan.workers:  # on the rank's track: say which process the thread is of
            name = f"{plan.process_names.get(pid, f'pid {pid}')} · {name}"
        labels.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": plan.merged_pid(pid),
                "tid": thread,
                "args": {"name": name},
            }
        )
        labels.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": plan.merged_pid(pid),
                "tid": thread,
                "args": {"sort_index": order},
            }
        )
    return labels

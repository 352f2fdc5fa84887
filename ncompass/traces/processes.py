"""Merge the traces of the processes of one run into one timeline, one process track each.

Unlike the per-rank merge (:mod:`ncompass.traces.merge`), every event keeps its real OS pid:
the processes ran on one machine, so their pids are distinct already. Each process's track is
named by its role (``rank 1``, ``DataLoader worker 0``, ``EngineCore_0``, its command line);
timestamps are aligned on ``baseTimeNanoseconds`` and flow ids and correlations are made unique
per process, so links never cross processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ncompass.errors import TraceError
from ncompass.traces.events import Event, microseconds
from ncompass.traces.reader import TraceReader, read_metadata
from ncompass.traces.writer import TraceWriter

_ID_STRIDE = 10**12  # per-process offset of flow ids and correlations
_PROCESS_LABELS = ("process_name", "process_labels", "process_sort_index")


@dataclass(frozen=True)
class ProcessTrace:
    """One process's trace and how its track is named.

    Attributes:
        path: The process's own trace.
        pid: Its OS process id (the pid of its CPU events).
        label: The name of its track.
    """

    path: Path
    pid: int
    label: str


def merge_processes(
    traces: Sequence[ProcessTrace],
    output_path: str | Path,
    *,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write the traces of ``traces`` into one file, the first process's track first.

    Args:
        traces: The processes, in the order their tracks are shown.
        output_path: Where to write (written under a temporary name, then moved into place).
        metadata: More top-level keys for the merged trace.

    Raises:
        TraceError: a trace is missing or corrupt (naming it), or none is given.
    """
    if not traces:
        raise TraceError("merging processes needs at least one trace file")
    headers = [read_metadata(trace.path) for trace in traces]
    bases = [_base_time_ns(header) for header in headers]
    aligned = all(base is not None for base in bases)
    earliest = min((base for base in bases if base is not None), default=0)
    header: dict[str, Any] = {"schemaVersion": headers[0].get("schemaVersion", 1)}
    if "deviceProperties" in headers[0]:
        header["deviceProperties"] = headers[0]["deviceProperties"]
    if aligned:
        header["baseTimeNanoseconds"] = earliest
    header["displayTimeUnit"] = "ms"
    header.update(metadata or {})
    with TraceWriter(output_path, metadata=header) as writer:
        for index, (trace, base) in enumerate(zip(traces, bases, strict=True)):
            # with every trace relative to its own base, shift onto the earliest; otherwise
            # make every timestamp absolute (a trace without a base already is)
            shift_us = ((base or 0) - earliest if aligned else (base or 0)) / 1000.0
            for batch in TraceReader(trace.path, progress=False).batches():
                encoded = _encoded(trace, batch, shift_us, index * _ID_STRIDE)
                writer.write_encoded((b",\n".join(encoded),), len(encoded))
            writer.write_many(_labels(trace, index))
    return Path(output_path)


def _base_time_ns(metadata: dict[str, Any]) -> int | None:
    base = metadata.get("baseTimeNanoseconds")
    return base if isinstance(base, int) and not isinstance(base, bool) else None


def _encoded(
    trace: ProcessTrace, events: list[Event], shift_us: float, id_offset: int
) -> list[bytes]:
    encoded: list[bytes] = []
    for event in events:
        labels_process = event.get("ph") == "M" and event.get("name") in _PROCESS_LABELS
        if labels_process and event.get("pid") == trace.pid:
            continue  # replaced by the role's label
        copy = dict(event)
        if "ts" in copy and shift_us:
            copy["ts"] = microseconds(copy["ts"]) + shift_us
        if isinstance(copy.get("id"), int) and id_offset:
            copy["id"] = copy["id"] + id_offset
        args = copy.get("args")
        if isinstance(args, dict) and isinstance(args.get("correlation"), int) and id_offset:
            copy["args"] = {**args, "correlation": args["correlation"] + id_offset}
        try:
            encoded.append(orjson.dumps(copy))
        except (orjson.JSONEncodeError, TypeError) as error:
            raise TraceError(
                f"{trace.path}: cannot merge the trace: an event holds a value JSON output "
                f"cannot carry ({error})"
            ) from None
    return encoded


def _labels(trace: ProcessTrace, index: int) -> list[Event]:
    return [
        {
            "ph": "M",
            "name": "process_name",
            "pid": trace.pid,
            "tid": 0,
            "args": {"name": trace.label},
        },
        {
            "ph": "M",
            "name": "process_sort_index",
            "pid": trace.pid,
            "tid": 0,
            "args": {"sort_index": index},
        },
    ]


__all__ = ["ProcessTrace", "merge_processes"]

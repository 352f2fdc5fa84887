"""Stack sampling in every process of a discovery run, and the samples merged into one.

The discovery run asks ``ncompass run`` to call :func:`start_in_process` in each process it
follows, once that process starts its work (its profiler starts: it imported torch or a module
of the spec). A process that never does pays nothing. The sampler watches the thread that
started the work (the process's main thread, in a ``multiprocessing`` child, a DataLoader
worker or a ``torchrun`` rank) and, when the process ends, writes what it sampled beside the
process's own trace: ``NAME.processes/PID.stacks.json``, with the process's pid and role.

:func:`merge_processes` then puts the run's own samples and every process's into one
:class:`~ncompass.session.sampler.StackSamples`, in time order, each sample keeping its pid.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ncompass.session.sampler import DEFAULT_INTERVAL_S, STACKS_SUFFIX, StackSampler, StackSamples

HOOK = __name__
"""The module ``ncompass run`` calls into in each process (``RunOptions.process_hooks``)."""


def hook_options(folder: Path, interval_s: float = DEFAULT_INTERVAL_S) -> dict[str, Any]:
    """What each process needs: where to write its samples, and the sampling period."""
    return {"folder": str(folder), "interval_s": interval_s}


def start_in_process(options: Mapping[str, Any]) -> Callable[[], None]:
    """Start sampling this thread; returns what writes the samples when the process ends."""
    sampler = StackSampler(interval_s=float(options.get("interval_s", DEFAULT_INTERVAL_S)))
    sampler.start()
    folder = Path(str(options["folder"]))
    pid = os.getpid()

    def write() -> None:
        samples = sampler.stop()
        from ncompass.capture.follow.bootstrap import identity

        role = identity()["role"]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{pid}{STACKS_SUFFIX}"
        partial = path.with_name(f"{path.name}.{pid}.partial")
        partial.write_bytes(orjson.dumps({"pid": pid, "role": role, **samples.to_dict()}))
        os.replace(partial, path)

    return write


def read_processes(folder: Path) -> list[tuple[int, str, StackSamples]]:
    """The samples each process wrote into ``folder``: ``(pid, role, samples)``."""
    found = []
    for path in sorted(folder.glob(f"*{STACKS_SUFFIX}")):
        try:
            data = orjson.loads(path.read_bytes())
            found.append((int(data["pid"]), str(data["role"]), StackSamples.from_dict(data)))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a process killed while writing: its samples are lost, the others count
    return found


def merge_processes(
    own: StackSamples, root_pid: int, others: list[tuple[int, str, StackSamples]]
) -> StackSamples:
    """The run's own samples and the other processes', in time order, each keeping its pid."""
    if not others:
        return own
    merged = StackSamples(interval_s=own.interval_s, root_pid=root_pid)
    index: dict[Any, int] = {}
    rows: list[tuple[float, float, int, list[int]]] = []
    for pid, samples in [(root_pid, own), *[(pid, samples) for pid, _, samples in others]]:
        mapping = []
        for frame in samples.frames:
            position = index.get(frame)
            if position is None:
                position = index[frame] = len(merged.frames)
                merged.frames.append(frame)
            mapping.append(position)
        for stack, at, weight in zip(
            samples.stacks, samples.times_us, samples.weights_us, strict=True
        ):
            rows.append((at, weight, pid, [mapping[i] for i in stack]))
    rows.sort(key=lambda row: row[0])
    for at, weight, pid, stack in rows:
        merged.stacks.append(stack)
        merged.times_us.append(at)
        merged.weights_us.append(weight)
        merged.pids.append(pid)
    merged.processes = {pid: role for pid, role, _ in others}
    return merged


__all__ = ["HOOK", "hook_options", "merge_processes", "read_processes", "start_in_process"]

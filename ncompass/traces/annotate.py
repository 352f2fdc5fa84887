"""Add ``args`` entries to some events of a trace file, streaming, and replace it atomically.

The trace is read one batch of events at a time and written under a temporary name next to it,
which replaces the original only once complete (so memory stays bounded and an interrupted run
leaves the original trace as it was). Top-level keys keep their place: those before
``traceEvents`` stay before it, the others after.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ncompass.traces.events import Event
from ncompass.traces.reader import TraceReader
from ncompass.traces.writer import TraceWriter

KERNEL_MARKERS_ARG = "ncompass_markers"
"""The ``args`` key naming, in a compiled kernel's event, the markers its source lines are in
(innermost first)."""

ArgsFor = Callable[[Event], Mapping[str, Any] | None]
"""Given an event, the ``args`` entries to add to it (None or empty: leave it as it is)."""


def annotate_trace(path: str | Path, args_for: ArgsFor, *, progress: bool | None = False) -> int:
    """Add ``args_for(event)`` to the ``args`` of every event of the trace at ``path``.

    Args:
        path: A ``.json`` or ``.json.gz`` trace, rewritten in place (atomically).
        args_for: What to add to each event.
        progress: Progress bar on stderr (None: only on a terminal, for large files).

    Returns:
        How many events changed; with none, the file is left untouched.

    Raises:
        TraceError: The trace is missing or corrupt, or cannot be written.
    """
    source = Path(path)
    reader = TraceReader(source, progress=progress)
    writer: TraceWriter | None = None
    header: set[str] = set()
    changed = 0
    try:
        for batch in reader.batches():
            if writer is None:  # the keys before "traceEvents" are known by the first batch
                header = set(reader.metadata)
                writer = TraceWriter(source, metadata=reader.metadata)
            for position, event in enumerate(batch):
                extra = args_for(event)
                if extra:
                    args = event.get("args")
                    batch[position] = {
                        **event,
                        "args": {**(args if isinstance(args, dict) else {}), **extra},
                    }
                    changed += 1
            writer.write_many(batch)
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    if writer is None:
        return 0
    if not changed:
        writer.discard()
        return 0
    trailer = {key: value for key, value in reader.metadata.items() if key not in header}
    writer.close(trailer)
    return changed


__all__ = ["KERNEL_MARKERS_ARG", "ArgsFor", "annotate_trace"]

"""One large trace folded by several processes at once.

The event array is cut at event boundaries into one byte range per process. Each process folds
its range as a part, with times relative to the whole trace's origin (read here from the first
events), and this process merges the parts in file order (:meth:`Collector.absorb`): the result
is exactly what one pass gives. A cut is a guess (``}, {`` between two events, as the scanner
guesses): a wrong one leaves a range that is not a run of whole events, whose scanner then
fails, and the trace is folded in one pass instead, which also reports a corrupt file exactly as
it always does (and an event holding a value linking cannot use, counting from the first event).
Gzip-compressed traces are folded in one pass: one process must inflate it all.
"""

from __future__ import annotations

from pathlib import Path

from ncompass.traces._collector import Collector, FoldedPart, LinkedTrace
from ncompass.traces._decode import decode_link_events
from ncompass.traces._progress import byte_progress
from ncompass.traces._scanner import BETWEEN_EVENTS, EventScanner, ScanError
from ncompass.traces.parallel import default_jobs, worker_pool
from ncompass.traces.reader import READ_SIZE, TraceValueError

SPLIT_MIN_BYTES = 64 << 20
"""Smaller traces are folded in one pass: starting the processes would cost what they save."""
_GZIP_MAGIC = b"\x1f\x8b"
_HEAD_BYTES = 4 << 20  # read to find where the events start, and the origin
_OPENING = {True: b"[", False: b'{"traceEvents":['}
_CLOSING = {True: b"]", False: b"]}"}


class _CannotSplit(Exception):
    """A part could not be folded apart from the others: fold the whole trace in one pass."""


def fold_in_parts(path: Path, jobs: int | None, progress: bool | None) -> LinkedTrace | None:
    """Fold a large plain-JSON trace in ``jobs`` processes (None: one per core).

    Returns:
        The folded trace (metadata set, not linked yet), or None where one pass must fold it:
        one job, a small or gzip-compressed file, no event boundary found, a begin/end pair
        across a cut, or a part that does not scan (a corrupt file).
    """
    workers = jobs if jobs is not None else default_jobs()
    try:
        size = path.stat().st_size
    except OSError:
        return None  # the one pass reports it, with its usual message
    if workers < 2 or size < SPLIT_MIN_BYTES:
        return None
    with open(path, "rb") as handle:
        head = handle.read(_HEAD_BYTES)
        start = None if head.startswith(_GZIP_MAGIC) else _events_start(path, head)
        if start is None:
            return None
        events_start, bare, metadata, origin = start
        ranges = _cut(handle, events_start, size, workers)
    if len(ranges) < 2:
        return None
    try:
        return _fold_ranges(path, ranges, bare, metadata, origin, progress)
    except _CannotSplit:
        return None


def _fold_ranges(
    path: Path,
    ranges: list[tuple[int, int | None]],
    bare: bool,
    metadata: dict[str, object],
    origin: float,
    progress: bool | None,
) -> LinkedTrace:
    """Fold the first range here while worker processes fold the others; merge in order."""
    collector = Collector(LinkedTrace(path), origin)
    size = path.stat().st_size
    label = f"reading {path.name} on {len(ranges)} cores"
    with (
        byte_progress(label, size, progress) as advance,
        worker_pool(len(ranges) - 1) as pool,
    ):
        futures = [
            pool.submit(_fold_range, str(path), begin, end, origin, bare)
            for begin, end in ranges[1:]
        ]
        tail: dict[str, object] = {}
        part = _fold_range(str(path), *ranges[0], origin, bare)
        for index, (begin, end) in enumerate(ranges):
            if index:
                part = futures[index - 1].result()
            if part is None:
                raise _CannotSplit
            try:
                collector.absorb(part)
            except ValueError:
                raise _CannotSplit from None
            tail = part.trace.metadata
            part = None  # merged: free it while the next one arrives
            advance((end if end is not None else size) - begin)
    trace = collector.finish()
    trace.metadata = {**metadata, **tail}
    return trace


def _events_start(path: Path, head: bytes) -> tuple[int, bool, dict[str, object], float] | None:
    """Where the events start, whether the text is a bare array, the header keys and the origin
    (None when the first few MB do not tell)."""
    scanner = EventScanner(decode_link_events)
    try:
        events = scanner.feed(head)
    except ScanError:
        return None
    if scanner.events_start is None:
        return None
    collector = Collector(LinkedTrace(path))
    try:
        collector.add(events)
    except TraceValueError:
        return None  # the one pass reports it
    if collector.origin is None:
        return None
    return scanner.events_start, scanner.is_bare_array, dict(scanner.metadata), collector.origin


def _cut(handle: object, events_start: int, size: int, parts: int) -> list[tuple[int, int | None]]:
    """Byte ranges of about equal size, each from the ``{`` of an event to the ``}`` of another
    (the last to the end of the file)."""
    ranges: list[tuple[int, int | None]] = []
    begin = events_start
    for part in range(1, parts):
        target = events_start + part * (size - events_start) // parts
        if target <= begin:
            continue
        handle.seek(target)  # type: ignore[attr-defined]
        window = handle.read(READ_SIZE)  # type: ignore[attr-defined]
        boundary = BETWEEN_EVENTS.search(window)
        if boundary is None:
            continue
        ranges.append((begin, target + boundary.start() + 1))
        begin = target + boundary.end() - 1
    ranges.append((begin, None))
    return ranges


def _fold_range(
    path: str, begin: int, end: int | None, origin: float, bare: bool
) -> FoldedPart | None:
    """Fold the events in ``[begin, end)`` (to the end of the file when ``end`` is None) in a
    worker process; None when that text is not a run of whole events."""
    collector = Collector(LinkedTrace(Path(path)), origin, part=True)
    scanner = EventScanner(decode_link_events)
    try:
        scanner.feed(_OPENING[bare])
        with open(path, "rb") as handle:
            handle.seek(begin)
            remaining = end - begin if end is not None else None
            while chunk := handle.read(
                READ_SIZE if remaining is None else min(READ_SIZE, remaining)
            ):
                if remaining is not None:
                    remaining -= len(chunk)
                if events := scanner.feed(chunk):
                    collector.add(events)
        if end is not None:
            collector.add(scanner.feed(_CLOSING[bare]))
        collector.add(scanner.close())
    except (ScanError, TraceValueError):
        return None  # the one pass reports it, counting the events from the start of the file
    if collector.left_out:
        return None  # the one pass warns, naming the first event counted from the file's start
    collector.trace.metadata = scanner.metadata  # the keys after the events, in the last part
    return collector.part()

"""Stream the events of a Chrome/Kineto trace file (``.json`` or gzip-compressed).

Memory stays bounded by the chunk size plus what the caller keeps: events are decoded one
chunk of text at a time and handed out in batches.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ncompass.errors import NcompassWarning, TraceError
from ncompass.traces._decode import decode_link_events, decode_link_structs
from ncompass.traces._inflate import gunzip
from ncompass.traces._progress import byte_progress
from ncompass.traces._scanner import EventScanner, ScanError
from ncompass.traces.events import Event

_GZIP_MAGIC = b"\x1f\x8b"
# Bytes of plain JSON per read. Chunks this small reuse heap memory; 1 MiB ones made glibc map
# fresh pages for every chunk (0.2-0.3 CPU s more per GB, measured on link_trace).
READ_SIZE = 128 << 10


class _PicklableTraceError(TraceError):
    """A TraceError whose ``__init__`` takes more than its message, pickled as its message and
    attributes: one raised in a worker process (``summarize -j``) reaches the parent whole."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _restored, (type(self), str(self), self.__dict__)


def _restored(kind: type[TraceError], message: str, attributes: dict[str, Any]) -> TraceError:
    error = kind.__new__(kind)
    TraceError.__init__(error, message)
    error.__dict__.update(attributes)
    return error


class CorruptTraceError(_PicklableTraceError):
    """A trace file is truncated or malformed.

    Args:
        path: The trace file.
        offset: Byte offset of the problem in the JSON text (decompressed, for gzip files).
        detail: What is wrong there.
        compressed: Whether the file is gzip-compressed (the offset is then into its content).
    """

    def __init__(self, path: str | Path, offset: int, detail: str, *, compressed: bool) -> None:
        self.path = str(path)
        self.offset = offset
        self.detail = detail
        where = f"byte {offset} of its decompressed JSON" if compressed else f"byte {offset}"
        super().__init__(
            f"{self.path}: cannot read the trace at {where}: {detail}. "
            "Check that the file was copied completely, or export the trace again."
        )


class TraceValueError(_PicklableTraceError):
    """An event of a trace holds a value linking cannot use: a list where a pid belongs, a
    correlation id beyond 64 bits, ... (valid JSON, but not what a profiler writes).

    Args:
        path: The trace file.
        event: Which event, counting from 1 in file order (None when not known).
        label: The event as the message names it (its phase and name).
        detail: What is wrong with it.
    """

    def __init__(self, path: str | Path, event: int | None, label: str, detail: str) -> None:
        self.path = str(path)
        self.event = event
        self.detail = detail
        where = f"the {ordinal(event)} event ({label})" if event is not None else label
        super().__init__(
            f"{self.path}: cannot link the trace: {where} {detail}. "
            "Fix or remove that event, or export the trace again."
        )


class EventsLeftOutWarning(NcompassWarning):
    """Events of a trace were left out of the numbers: their duration is negative (Kineto
    wrote such events before 2022, for a range whose end it had not recorded).

    Args:
        path: The trace file.
        count: How many events were left out.
        first: The first of them, as the message names it.
    """

    def __init__(self, path: str | Path, count: int, first: str) -> None:
        self.path = str(path)
        self.count = count
        super().__init__(
            f"{self.path}: left out {count:,} event{'s' if count != 1 else ''} with a negative "
            f"duration, which no time can be given (the first: {first}); the numbers are of "
            "the other events"
        )


def ordinal(number: int) -> str:
    """``1st``, ``22nd``, ``1,013th``."""
    suffix = (
        "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    )
    return f"{number:,}{suffix}"


class TraceReader:
    """Read one trace file as a stream of events.

    Iterating yields events (dicts) in file order; :meth:`batches` yields them in lists, which is
    faster for tight loops. :attr:`metadata` holds the top-level keys other than
    ``traceEvents`` (``distributedInfo``, ``deviceProperties``, ``baseTimeNanoseconds``, ...);
    it is complete once iteration has finished.

    Args:
        path: A ``.json`` or gzip-compressed (``.json.gz``) Chrome/Kineto trace.
        progress: Show a progress bar on stderr: True/False, or None for "on a terminal, for
            large files".

    Raises:
        TraceError: The file is missing or unreadable (when iteration starts).
        CorruptTraceError: The file is truncated or malformed (during iteration).
    """

    def __init__(self, path: str | Path, *, progress: bool | None = None) -> None:
        self.path = Path(path)
        self.metadata: dict[str, Any] = {}
        self._progress = progress

    def __iter__(self) -> Iterator[Event]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[Event]]:
        """Yield the events in lists, in file order, as the text is decoded."""
        return self._batches(EventScanner())

    def link_batches(self) -> Iterator[list[Any]]:
        """Like :meth:`batches`, but most events come as compact ``LinkEvent`` structs holding
        only the keys trace linking reads (dicts where the fast decoder cannot read a batch, and
        everywhere when ``msgspec`` is not installed)."""
        return self._batches(EventScanner(decode_link_events))

    def struct_batches(self) -> Iterator[list[Any]]:
        """Like :meth:`batches`, but events come as compact ``LinkEvent`` structs holding only
        the keys trace linking reads (dicts where the fast decoder cannot read a batch); plain
        dicts everywhere when ``msgspec`` is not installed."""
        return self._batches(EventScanner(decode_link_structs))

    def decoded_batches(self, decode: Callable[[bytes], list[Any] | None]) -> Iterator[list[Any]]:
        """Like :meth:`batches`, but each batch's text is decoded by ``decode`` (a caller's own
        compact structs; dicts where it returns None). Cutting and errors stay the reader's."""
        return self._batches(EventScanner(decode))

    def _batches(self, scanner: EventScanner) -> Iterator[list[Any]]:
        size = _size_of(self.path)
        self.metadata = scanner.metadata
        with open(self.path, "rb") as handle:
            compressed = handle.read(2) == _GZIP_MAGIC
            handle.seek(0)
            chunks = gunzip(handle, self.path) if compressed else _plain(handle)
            label = f"reading {self.path.name}"
            with byte_progress(label, size, self._progress, compressed=compressed) as advance:
                try:
                    for chunk, read in chunks:
                        advance(read)
                        events = scanner.feed(chunk)
                        if events:
                            yield events
                    events = scanner.close()
                except ScanError as error:
                    raise CorruptTraceError(
                        self.path, error.offset, error.detail, compressed=compressed
                    ) from None
        if events:
            yield events


def read_metadata(path: str | Path) -> dict[str, Any]:
    """Return a trace's top-level keys other than ``traceEvents`` (reads the whole file).

    Args:
        path: The trace file.

    Returns:
        For example ``{"schemaVersion": 1, "distributedInfo": {...}, "baseTimeNanoseconds": ...}``.
    """
    reader = TraceReader(path, progress=False)
    for _ in reader.batches():
        pass
    return reader.metadata


def _size_of(path: Path) -> int:
    try:
        if path.is_dir():
            raise TraceError(f"{path} is a directory: pass a trace file (.json or .json.gz)")
        status = path.stat()
        if not stat.S_ISREG(status.st_mode):
            # a pipe (`<(zcat ...)`, /dev/stdin) reads once, and commands read a trace twice
            what = "a pipe" if stat.S_ISFIFO(status.st_mode) else "not a regular file"
            raise TraceError(
                f"{path} is {what}: a trace is read more than once, so it must be a file; "
                "save it to one first (… > trace.json) and pass that"
            )
        return status.st_size
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file; check the path") from None
    except OSError as error:
        raise TraceError(f"{path}: cannot read the trace file ({error.strerror})") from None


def _plain(handle: Any) -> Iterator[tuple[bytes, int]]:
    while chunk := handle.read(READ_SIZE):
        yield chunk, len(chunk)

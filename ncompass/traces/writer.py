"""Write Chrome/Kineto traces event by event, as ``.json`` or gzip-compressed ``.json.gz``."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import orjson

from ncompass._files import temporary_path
from ncompass.errors import TraceError
from ncompass.overwrite_guard import unwritable_reason
from ncompass.traces.events import Event
from ncompass.traces.raw_json import raw_json_default

_GZIP_LEVEL = 6  # zlib's default: near-best size at a few times the speed of level 9
# The compressor is fed blocks of this size (the last one shorter), whatever the writes were:
# zlib-ng's output depends on how its input was cut, and the same events must give the same
# file however they were written (``merge --jobs``). Below glibc's mmap threshold (128 KiB).
_GZIP_BLOCK = 64 << 10


def _encoded(event: Event) -> bytes:
    """One event as JSON; a lone surrogate in it (``"a\\ud800b"``, which JSON allows and orjson
    refuses) is written back as the same escape, so the copy says what the source said."""
    try:
        return orjson.dumps(event)
    except TypeError as error:
        if "surrogates" not in str(error):
            raise  # any other value orjson refuses stays refused, as before
        return json.dumps(event, separators=(",", ":")).encode()


class TraceWriter:
    """Stream events into a trace file that Perfetto and chrome://tracing open.

    The file is written under a temporary name and moved into place on :meth:`close`, so a
    failed or interrupted write never leaves a half trace behind. Use it as a context manager.

    Args:
        path: Where to write; a name ending in ``.gz`` is gzip-compressed.
        metadata: Top-level keys written before ``traceEvents`` (``schemaVersion``,
            ``distributedInfo``, ``deviceProperties``, ``baseTimeNanoseconds``, ...).

    Raises:
        TraceError: The file cannot be created.
    """

    def __init__(self, path: str | Path, *, metadata: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.events_written = 0
        self._partial = temporary_path(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            raw = open(self._partial, "wb")  # noqa: SIM115 - closed in close()
        except OSError as error:
            reason = unwritable_reason(self.path, error)
            raise TraceError(f"{self.path}: cannot write the trace ({reason})") from None
        self._stream: IO[bytes] | _Blocks = raw
        if self.path.name.endswith(".gz"):
            self._stream = _Blocks(
                _gzip_file_class()(
                    filename="", mode="wb", fileobj=raw, compresslevel=_GZIP_LEVEL, mtime=0
                ),
                _GZIP_BLOCK,
            )
        self._raw = raw
        header = {key: value for key, value in (metadata or {}).items() if key != "traceEvents"}
        opening = orjson.dumps(header, default=raw_json_default)[
            :-1
        ]  # drop the closing '}' to continue the object
        self._stream.write(opening + (b", " if header else b"") + b'"traceEvents": [\n')

    def write(self, event: Event) -> None:
        """Append one event."""
        self.write_many((event,))

    def write_many(self, events: Iterable[Event]) -> None:
        """Append events, in order."""
        encoded = [_encoded(event) for event in events]
        if not encoded:
            return
        prefix = b",\n" if self.events_written else b""
        self._stream.write(prefix + b",\n".join(encoded))
        self.events_written += len(encoded)

    def write_encoded(self, chunks: Iterable[bytes], count: int) -> None:
        """Append ``count`` events already encoded and joined by ``b",\\n"`` (from a worker).

        The bytes are the same :meth:`write_many` would have written for those events.
        """
        if not count:
            return
        if self.events_written:
            self._stream.write(b",\n")
        for chunk in chunks:
            self._stream.write(chunk)
        self.events_written += count

    def close(self, trailer: Mapping[str, Any] | None = None) -> Path:
        """Finish the file and move it into place.

        Args:
            trailer: Top-level keys written after ``traceEvents``.

        Returns:
            The path written.
        """
        closing = b"\n]"
        if trailer:
            closing += b", " + orjson.dumps(dict(trailer), default=raw_json_default)[1:]
        else:
            closing += b"}"
        self._stream.write(closing + b"\n")
        self._stream.close()
        self._raw.close()
        try:
            os.replace(self._partial, self.path)  # over a symlink, not through it
        except OSError as error:  # a folder of that name, say
            self._partial.unlink(missing_ok=True)
            raise TraceError(f"{self.path}: cannot write the trace ({error.strerror})") from None
        return self.path

    def discard(self) -> None:
        """Abandon the file: nothing is left at :attr:`path` or under the temporary name."""
        self._stream.close()
        self._raw.close()
        self._partial.unlink(missing_ok=True)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            if not self._raw.closed:
                self.close()
        else:
            self.discard()


class _Blocks:
    """A write-only stream that passes on what it is given in blocks of ``size`` bytes."""

    def __init__(self, stream: gzip.GzipFile, size: int) -> None:
        self._stream = stream
        self._size = size
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        pending = self._pending
        pending += data
        whole = len(pending) - len(pending) % self._size
        if not whole:
            return
        with memoryview(pending) as view:
            for start in range(0, whole, self._size):
                self._stream.write(view[start : start + self._size])
        del pending[:whole]

    def close(self) -> None:
        """Pass on the last, shorter block and close the stream."""
        if self._pending:
            self._stream.write(bytes(self._pending))
            self._pending.clear()
        self._stream.close()


def _gzip_file_class() -> type[gzip.GzipFile]:
    """zlib-ng's ``GzipFile`` when installed (1.6x zlib's speed at level 6, the same size), else
    the standard one; both write plain gzip that any reader opens."""
    try:
        from zlib_ng.gzip_ng import GzipNGFile
    except ImportError:
        return gzip.GzipFile
    return GzipNGFile

"""Inflate gzip traces: with zlib-ng (``zlib-ng``) when it is installed, else with ``zlib``.

zlib-ng inflates trace JSON about twice as fast as zlib (``benchmarks/bench_inflate.py``)
through the same ``decompressobj`` interface and with the same error texts, so the reader's
events and error messages do not depend on which of the two ran.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

from ncompass.errors import TraceError

COMPRESSED_READ_SIZE = 64 << 10
# At most this much JSON per chunk, however well it compressed. Small on purpose: chunks (and
# the scanner's buffer around them) past glibc's mmap threshold (128 KiB) are mapped afresh
# and faulted in page by page, and zlib-ng grows its output by realloc, which maps them too.
# Reading 250 MB of JSON, 1 MiB chunks cost 0.3-0.4 s of system time, 64 KiB chunks 0.02 s.
INFLATED_CHUNK_SIZE = 64 << 10


def inflater() -> ModuleType:
    """The fastest ``zlib``-compatible module installed: ``zlib_ng.zlib_ng``, else ``zlib``."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return zlib
    return zlib_ng


def gunzip(handle: BinaryIO, path: Path) -> Iterator[tuple[bytes, int]]:
    """Inflate gzip members one after another (``cat a.gz b.gz`` is a valid gzip file).

    Args:
        handle: The open gzip file, at its start.
        path: Its name, for error messages.

    Yields:
        Chunks of at most :data:`INFLATED_CHUNK_SIZE` bytes of JSON, each with the compressed
        bytes read from ``handle`` since the previous chunk (for progress).

    Raises:
        TraceError: The gzip data is corrupt or ends inside a member.
    """
    library = inflater()
    decompressor = library.decompressobj(wbits=31)
    inside_member = False
    compressed_offset = 0
    while raw := handle.read(COMPRESSED_READ_SIZE):
        compressed_offset += len(raw)
        read = len(raw)
        while raw:
            inside_member = True
            try:
                chunk = decompressor.decompress(raw, INFLATED_CHUNK_SIZE)
            except library.error as error:
                raise TraceError(
                    f"{path}: the gzip data is corrupt near compressed byte {compressed_offset} "
                    f"({error}); check that the file was copied completely"
                ) from None
            raw = decompressor.unconsumed_tail
            if decompressor.eof:
                raw = decompressor.unused_data
                decompressor = library.decompressobj(wbits=31)
                inside_member = False
            yield chunk, read
            read = 0
    if inside_member:
        raise TraceError(
            f"{path}: the gzip data is truncated at compressed byte {compressed_offset}; "
            "check that the file was copied completely"
        )

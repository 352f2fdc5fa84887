"""On the cluster: pack a node's traces where the dashboard can serve them back.

Why the Ray log folder: the dashboard of every Ray cluster serves the files under each node's
log folder over HTTP (the state API's log endpoints, ``ray logs``), for any node, through the
same address the Jobs API uses. So traces come back over the one port the user already reaches,
from every node of a multi-node job, with no storage bucket, no extra port and no server of
ours. That endpoint streams whole files only, so each trace is cut into gzip chunks: an
interrupted fetch resumes at the first missing chunk and never downloads a finished one again.

Standard library only (this runs before ncompass's dependencies are known to be there).
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from ncompass import environment_variables
from ncompass._files import write_atomic
from ncompass.remote.manifest import MANIFEST_NAME, Chunk, NodeManifest, PackedFile

CHUNK_ENV = environment_variables.NCOMPASS_REMOTE_CHUNK_BYTES
LOGS_DIR_ENV = environment_variables.NCOMPASS_REMOTE_LOGS_DIR
DEFAULT_CHUNK_BYTES = 8 << 20
_READ_BLOCK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
# Fast compression: traces are JSON and shrink ~8x even at level 1; the GPU node's time matters
# more than the last few percent.
_GZIP_LEVEL = 1


class PackError(Exception):
    """The node's traces cannot be packed (no log folder, disk full)."""


def node_logs_dir() -> Path:
    """This node's Ray log folder.

    Ray sends the job's (and every worker's) stdout into a file of that folder, so the folder
    of our own stdout is the answer; ``$NCOMPASS_REMOTE_LOGS_DIR`` overrides it.

    Raises:
        PackError: stdout is not a file in a Ray log folder and no override is set.
    """
    explicit = os.environ.get(LOGS_DIR_ENV)
    if explicit:
        return Path(explicit)
    for descriptor in (1, 2):
        try:
            target = Path(os.readlink(f"/proc/self/fd/{descriptor}"))
        except OSError:
            continue
        if target.is_absolute() and target.parent.name == "logs" and target.is_file():
            return target.parent
    raise PackError(
        "cannot find this node's Ray log folder (stdout is not a Ray log file); "
        f"set {LOGS_DIR_ENV} to it"
    )


def chunk_bytes_from_env() -> int:
    """The chunk size: ``$NCOMPASS_REMOTE_CHUNK_BYTES`` or 8 MiB."""
    try:
        value = int(os.environ.get(CHUNK_ENV, DEFAULT_CHUNK_BYTES))
    except ValueError:
        return DEFAULT_CHUNK_BYTES
    return max(value, 1024)


class _ChunkWriter:
    """Writes a byte stream into numbered chunk files of at most ``limit`` bytes."""

    def __init__(self, folder: Path, prefix: str, limit: int) -> None:
        self.folder = folder
        self.prefix = prefix
        self.limit = limit
        self.chunks: list[Chunk] = []
        self._handle: BinaryIO | None = None
        self._hash = hashlib.sha256()
        self._size = 0

    def write(self, data: bytes) -> None:
        while data:
            if self._handle is None:
                self._open()
            room = self.limit - self._size
            piece, data = data[:room], data[room:]
            assert self._handle is not None
            self._handle.write(piece)
            self._hash.update(piece)
            self._size += len(piece)
            if self._size >= self.limit:
                self._close()

    def finish(self) -> tuple[Chunk, ...]:
        if self._handle is not None:
            self._close()
        return tuple(self.chunks)

    def _open(self) -> None:
        name = f"chunks/{self.prefix}-{len(self.chunks):05d}"
        self._handle = (self.folder / name).open("wb")
        self._hash = hashlib.sha256()
        self._size = 0
        self.chunks.append(Chunk(name, 0, ""))

    def _close(self) -> None:
        assert self._handle is not None
        self._handle.close()
        self.chunks[-1] = Chunk(self.chunks[-1].name, self._size, self._hash.hexdigest())
        self._handle = None


def pack_file(source: Path, archive_path: str, folder: Path, index: int, limit: int) -> PackedFile:
    """Cut one file into (gzip) chunks under ``folder/chunks/``."""
    writer = _ChunkWriter(folder, f"{index:05d}", limit)
    digest = hashlib.sha256()
    size = 0
    with source.open("rb") as handle:
        head = handle.read(2)
        handle.seek(0)
        compressed = head == _GZIP_MAGIC
        compressor = None if compressed else zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 31)
        while block := handle.read(_READ_BLOCK):
            digest.update(block)
            size += len(block)
            writer.write(block if compressor is None else compressor.compress(block))
        if compressor is not None:
            writer.write(compressor.flush())
    return PackedFile(
        path=archive_path,
        size=size,
        sha256=digest.hexdigest(),
        encoding="identity" if compressed else "gzip",
        chunks=writer.finish(),
    )


def pack_outputs(
    outputs: Sequence[tuple[Path, str]], folder: Path, *, chunk_bytes: int
) -> tuple[PackedFile, ...]:
    """Pack ``(file, path inside the job's folder)`` pairs into ``folder``.

    Raises:
        PackError: the folder cannot be written (disk full, permissions).
    """
    try:
        (folder / "chunks").mkdir(parents=True, exist_ok=True)
        return tuple(
            pack_file(source, archive, folder, index, chunk_bytes)
            for index, (source, archive) in enumerate(outputs)
        )
    except OSError as error:
        raise PackError(f"{folder}: cannot pack the traces ({error.strerror})") from None


def write_manifest(manifest: NodeManifest, folder: Path) -> Path:
    """Write ``manifest.json`` atomically: it appears only once every chunk is in place."""
    return write_atomic(folder / MANIFEST_NAME, manifest.to_json(), fsync=True)


__all__ = [
    "CHUNK_ENV",
    "DEFAULT_CHUNK_BYTES",
    "LOGS_DIR_ENV",
    "PackError",
    "chunk_bytes_from_env",
    "node_logs_dir",
    "pack_file",
    "pack_outputs",
    "write_manifest",
]

"""Bring a job's traces home: every node's pack, chunk by chunk, verified, resumable.

The files land in ``<trace folder>/<job id>/``, under the paths the job gave them. Chunks are
downloaded into ``.partial/`` next to them and kept as soon as their SHA-256 matches, so an
interrupted fetch (Ctrl-C, a dropped connection) resumes at the first chunk it does not have.
A file is assembled, checked against the SHA-256 of the original, and only then appears.

Nothing already there is overwritten: a file identical to the job's is left alone; a different
file of the same name (edited, filtered in place) is kept, and the job's copy is saved beside
it as ``NAME-1.json``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from ncompass._files import (
    atomic_output,
    move_if_absent,
    removed_on_error,
    sha256_file,
    temporary_path,
)
from ncompass.remote.dashboard import Dashboard, FileMissingError
from ncompass.remote.errors import ClusterUnreachableError, RemoteError
from ncompass.remote.manifest import MANIFEST_NAME, PACK_ROOT, Chunk, NodeManifest, PackedFile

PARTIAL_FOLDER = ".partial"
LOCK_NAME = ".fetch.lock"
DOWNLOAD_ATTEMPTS = 3
RETRY_PAUSE_S = 0.5
_HASH_BLOCK = 1 << 20
_SETTLE_POLL_S = 0.5


class DamagedChunkError(RemoteError):
    """A chunk arrived with the wrong size or checksum."""


@dataclass(frozen=True)
class ChunkProgress:
    """One chunk done (for progress displays).

    Attributes:
        path: The file it belongs to (inside the job's folder).
        index: The chunk's index in that file.
        chunks: How many chunks the file has.
        size: The chunk's size in bytes.
        downloaded: False when the chunk was already here from an earlier fetch.
    """

    path: str
    index: int
    chunks: int
    size: int
    downloaded: bool


@dataclass
class FetchReport:
    """What a fetch found and did.

    Attributes:
        job_dir: The job's local folder.
        manifests: Every node's manifest, by node rank.
        local_paths: Each of the job's files (path inside the job) → where it is locally.
        written: Files this fetch assembled.
        present: Files that were already here, identical.
        diverted: ``(kept, saved)``: a different local file was kept and the job's saved aside.
        chunks_downloaded: Chunks downloaded now.
        chunks_reused: Chunks already here from an interrupted fetch.
        bytes_downloaded: Bytes downloaded now.
    """

    job_dir: Path
    manifests: list[NodeManifest] = field(default_factory=list)
    local_paths: dict[str, Path] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    present: list[Path] = field(default_factory=list)
    diverted: list[tuple[Path, Path]] = field(default_factory=list)
    chunks_downloaded: int = 0
    chunks_reused: int = 0
    bytes_downloaded: int = 0

    @property
    def total_bytes(self) -> int:
        """The unpacked size of all the job's files."""
        return sum(item.size for manifest in self.manifests for item in manifest.files)

    def rank_traces(self) -> list[tuple[int, Path]]:
        """``(rank, local trace)`` of every rank that wrote its ``ncompass run`` trace."""
        traces = [
            (record.rank, self.local_paths[record.trace])
            for manifest in self.manifests
            for record in manifest.ranks
            if record.trace is not None and record.trace in self.local_paths
        ]
        return sorted(traces)


@dataclass(frozen=True)
class NodePack:
    """One node's pack of a job and the Ray node that serves it."""

    node_id: str
    node_ip: str
    manifest: NodeManifest


def find_packs(dashboard: Dashboard, job_id: str) -> list[NodePack]:
    """Every node's pack of ``job_id``, by node rank (looked for on every alive node).

    Raises:
        RemoteError: a manifest is unreadable.
    """
    found: dict[int, NodePack] = {}
    pattern = f"{PACK_ROOT}/{job_id}/node*/{MANIFEST_NAME}"
    for node in dashboard.nodes():
        if not node.alive:
            continue
        for name in dashboard.list_files(node.node_id, pattern):
            try:
                manifest = NodeManifest.from_json(b"".join(dashboard.read_file(node.node_id, name)))
            except FileMissingError:
                continue
            except ValueError as error:
                raise RemoteError(
                    f"{name} on node {node.node_ip} is not a readable ncompass manifest ({error})"
                ) from None
            # Several Ray nodes on one machine share a log folder, so one pack can show up
            # under each of them: the first node that has it serves it.
            found.setdefault(manifest.node_rank, NodePack(node.node_id, node.node_ip, manifest))
    return [found[rank] for rank in sorted(found)]


def fetch_job(
    dashboard: Dashboard,
    job_id: str,
    job_dir: Path,
    *,
    on_chunk: Callable[[ChunkProgress], None] | None = None,
    settle_s: float = 0.0,
) -> FetchReport:
    """Fetch every file job ``job_id`` packed into ``job_dir``; resume what is half done.

    Args:
        settle_s: How long to keep looking when the job left no pack yet: a job that was just
            stopped is marked ended while its ranks are still writing and packing their traces.

    Raises:
        RemoteError: the job left nothing to fetch, a chunk is corrupt, or a file cannot be
            written (each names the file, the node or the address).
    """
    packs = find_packs(dashboard, job_id)
    deadline = time.monotonic() + settle_s
    while not packs and time.monotonic() < deadline:
        time.sleep(_SETTLE_POLL_S)
        packs = find_packs(dashboard, job_id)
    if not packs:
        raise RemoteError(
            f"job {job_id} has no packed traces on the Ray cluster at {dashboard.cluster.url}: "
            "it is still running, it failed before its ranks ran (see `ncompass jobs logs "
            f"{job_id}`), or the cluster restarted since (packs live in each node's Ray log "
            "folder until then)"
        )
    report = FetchReport(job_dir, [pack.manifest for pack in packs])
    try:
        job_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RemoteError(f"{job_dir}: cannot create the job's folder ({error.strerror})") from None
    with _exclusive(job_dir / LOCK_NAME):
        for pack in packs:
            for packed in pack.manifest.files:
                _fetch_file(dashboard, pack.node_id, pack.manifest, packed, report, on_chunk)
        _remove_empty_tree(job_dir / PARTIAL_FOLDER)
    return report


def _fetch_file(
    dashboard: Dashboard,
    node_id: str,
    manifest: NodeManifest,
    packed: PackedFile,
    report: FetchReport,
    on_chunk: Callable[[ChunkProgress], None] | None,
) -> None:
    destination = report.job_dir / packed.path
    existing = _identical_copy(destination, packed)
    if existing is not None:
        report.present.append(existing)
        report.local_paths[packed.path] = existing
        return
    staging = report.job_dir / PARTIAL_FOLDER / f"node{manifest.node_rank}" / packed.path
    pieces = []
    for index, chunk in enumerate(packed.chunks):
        piece = staging / f"{index:05d}"
        downloaded = not _is_chunk(piece, chunk.size, chunk.sha256)
        if downloaded:
            _download_with_retries(
                dashboard, node_id, f"{manifest.folder}/{chunk.name}", piece, chunk
            )
            report.chunks_downloaded += 1
            report.bytes_downloaded += chunk.size
        else:
            report.chunks_reused += 1
        pieces.append(piece)
        if on_chunk is not None:
            on_chunk(ChunkProgress(packed.path, index, len(packed.chunks), chunk.size, downloaded))
    destination.parent.mkdir(parents=True, exist_ok=True)
    with removed_on_error(temporary_path(destination)) as assembled:
        _assemble(pieces, packed, assembled)
        final = _place(assembled, destination)
    if final != destination:
        report.diverted.append((destination, final))
    report.written.append(final)
    report.local_paths[packed.path] = final
    shutil.rmtree(staging, ignore_errors=True)


def _download_with_retries(
    dashboard: Dashboard, node_id: str, remote: str, piece: Path, chunk: Chunk
) -> None:
    """Download one chunk; a damaged or dropped transfer is tried again, twice."""
    for attempt in range(DOWNLOAD_ATTEMPTS):
        try:
            _download_chunk(dashboard, node_id, remote, piece, chunk)
            return
        except (DamagedChunkError, ClusterUnreachableError):
            if attempt == DOWNLOAD_ATTEMPTS - 1:
                raise
            time.sleep(RETRY_PAUSE_S * (attempt + 1))


def _download_chunk(
    dashboard: Dashboard, node_id: str, remote: str, piece: Path, chunk: Chunk
) -> None:
    size, expected = chunk.size, chunk.sha256
    digest = hashlib.sha256()
    written = 0
    try:
        with atomic_output(piece) as partial:
            with partial.open("wb") as handle:
                for block in dashboard.read_file(node_id, remote):
                    handle.write(block)
                    digest.update(block)
                    written += len(block)
            if written != size or digest.hexdigest() != expected:
                raise DamagedChunkError(
                    f"{remote} from node {node_id[:12]} arrived damaged ({written} of {size} "
                    "bytes, checksum mismatch); run the fetch again: it resumes at this chunk"
                )
    except FileMissingError:
        raise RemoteError(
            f"{remote} is gone from node {node_id[:12]} of {dashboard.cluster.url} (the cluster "
            "restarted, or its log folder was cleaned); the chunks fetched so far are kept"
        ) from None
    except OSError as error:
        raise RemoteError(f"{piece}: cannot write ({error.strerror})") from None


def _assemble(pieces: list[Path], packed: PackedFile, output: Path) -> None:
    """Join (and gunzip) the chunks into ``output``; verify it against the job's file."""
    digest = hashlib.sha256()
    size = 0
    inflate = zlib.decompressobj(31) if packed.encoding == "gzip" else None
    try:
        with output.open("wb") as handle:
            for piece in pieces:
                with piece.open("rb") as source:
                    while block := source.read(_HASH_BLOCK):
                        data = inflate.decompress(block) if inflate is not None else block
                        handle.write(data)
                        digest.update(data)
                        size += len(data)
            if inflate is not None:
                tail = inflate.flush()
                handle.write(tail)
                digest.update(tail)
                size += len(tail)
    except zlib.error as error:
        raise RemoteError(f"{packed.path}: the packed chunks do not unpack ({error})") from None
    except OSError as error:
        raise RemoteError(f"{output}: cannot write ({error.strerror})") from None
    if size != packed.size or digest.hexdigest() != packed.sha256:
        raise RemoteError(
            f"{packed.path}: the unpacked file does not match the job's ({size} of "
            f"{packed.size} bytes, checksum mismatch); its chunks were discarded, fetch again"
        )


def _place(assembled: Path, destination: Path) -> Path:
    """Move ``assembled`` to ``destination``, or beside it when that name is taken."""
    for candidate in _candidates(destination):
        if move_if_absent(assembled, candidate):  # never replaces a file that is there
            return candidate
    raise RemoteError(f"{destination}: too many copies beside it")


def _identical_copy(destination: Path, packed: PackedFile) -> Path | None:
    """A local file (the destination or a saved-aside copy) with exactly the job's bytes."""
    for candidate in _candidates(destination):
        if not candidate.exists():
            return None
        if candidate.stat().st_size == packed.size and sha256_file(candidate) == packed.sha256:
            return candidate
    return None


def _candidates(destination: Path, limit: int = 1000) -> Iterator[Path]:
    """``NAME.json``, ``NAME-1.json``, ``NAME-2.json``, ... (``.ncompass.json`` kept whole)."""
    name = destination.name
    cut = name.find(".", 1)
    stem, suffix = (name, "") if cut < 0 else (name[:cut], name[cut:])
    yield destination
    for number in range(1, limit):
        yield destination.with_name(f"{stem}-{number}{suffix}")


def _is_chunk(piece: Path, size: int, sha256: str) -> bool:
    try:
        if piece.stat().st_size != size:
            return False
    except OSError:
        return False
    return sha256_file(piece) == sha256


def _remove_empty_tree(folder: Path) -> None:
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*"), key=lambda item: len(item.parts), reverse=True):
        if path.is_dir():
            with suppress(OSError):
                path.rmdir()
    with suppress(OSError):
        folder.rmdir()


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """One fetch per job folder at a time (a second waits), where the OS supports it.

    The lock file is removed when the fetch ends, so the job's folder holds only the job's
    files. Removing it is safe because a waiter that wakes up holding the lock of a removed
    file (its inode no longer at ``lock_path``) lets go and locks the current one.
    """
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; concurrent fetches are the user's call
        yield
        return
    while True:
        handle = lock_path.open("a")
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            current = os.stat(lock_path)
        except FileNotFoundError:
            current = None
        if current is not None and os.path.samestat(current, os.fstat(handle.fileno())):
            break
        handle.close()  # the holder before us removed this file: lock the new one
    try:
        yield
    finally:
        with suppress(OSError):
            lock_path.unlink()
        handle.close()  # unlocks, after the name is gone


__all__ = [
    "LOCK_NAME",
    "PARTIAL_FOLDER",
    "ChunkProgress",
    "DamagedChunkError",
    "FetchReport",
    "NodePack",
    "fetch_job",
    "find_packs",
]

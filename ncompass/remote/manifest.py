"""The pack manifest: what one node of a job left for ``fetch``, chunk by chunk.

Each node of a job packs its traces into ``<Ray log folder>/ncompass/<job id>/node<N>/``:
``chunks/`` (gzip-compressed pieces of every file) and ``manifest.json``, written last and
atomically, so a manifest that exists describes chunks that all exist. Every chunk and every
file carries its SHA-256, which makes a fetch resumable chunk by chunk and verifiable end to end.

Standard library only: this module runs on the cluster before ncompass's dependencies are known
to be there.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

PACK_ROOT = "ncompass"
MANIFEST_NAME = "manifest.json"
FORMAT = "ncompass-pack/1"


def node_folder(job_id: str, node_rank: int) -> str:
    """Where node ``node_rank`` packs job ``job_id``, relative to the node's Ray log folder."""
    return f"{PACK_ROOT}/{job_id}/node{node_rank}"


@dataclass(frozen=True)
class Chunk:
    """One piece of a packed file, stored as its own file on the node."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class PackedFile:
    """One file the job wrote.

    Attributes:
        path: Its path inside the job's trace folder (``/``-separated, relative).
        size: Its size in bytes once unpacked.
        sha256: The SHA-256 of its unpacked bytes.
        encoding: ``gzip`` (the chunks are one gzip stream) or ``identity`` (already
            compressed files travel as they are).
        chunks: Its pieces, in order.
    """

    path: str
    size: int
    sha256: str
    encoding: str
    chunks: tuple[Chunk, ...]

    @property
    def packed_size(self) -> int:
        """Bytes to download."""
        return sum(chunk.size for chunk in self.chunks)


@dataclass(frozen=True)
class RankRecord:
    """How one rank ended and which trace is its own.

    Attributes:
        rank: Global rank.
        local_rank: Rank on its node.
        exit_code: The rank's exit code (None if it never started).
        trace: Path of its ``ncompass run`` trace inside the job's folder, if one was written.
    """

    rank: int
    local_rank: int
    exit_code: int | None
    trace: str | None


@dataclass(frozen=True)
class NodeManifest:
    """Everything one node packed for one job."""

    job_id: str
    node_rank: int
    hostname: str
    trace_name: str
    world_size: int
    ranks: tuple[RankRecord, ...]
    files: tuple[PackedFile, ...]
    created_unix_s: float

    @property
    def folder(self) -> str:
        """The node's pack folder, relative to its Ray log folder."""
        return node_folder(self.job_id, self.node_rank)

    def to_json(self) -> bytes:
        """The manifest file's bytes."""
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=1).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> NodeManifest:
        """Parse and check a manifest.

        Raises:
            ValueError: not a manifest of this format, or a path that would leave the job's
                folder.
        """
        document: Any = json.loads(data)
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(f"not an {FORMAT} manifest")
        files = tuple(
            PackedFile(
                path=_safe_path(item["path"]),
                size=int(item["size"]),
                sha256=str(item["sha256"]),
                encoding=str(item["encoding"]),
                chunks=tuple(
                    Chunk(_safe_path(chunk["name"]), int(chunk["size"]), str(chunk["sha256"]))
                    for chunk in item["chunks"]
                ),
            )
            for item in document["files"]
        )
        ranks = tuple(
            RankRecord(
                rank=int(item["rank"]),
                local_rank=int(item["local_rank"]),
                exit_code=None if item["exit_code"] is None else int(item["exit_code"]),
                trace=None if item["trace"] is None else _safe_path(item["trace"]),
            )
            for item in document["ranks"]
        )
        return cls(
            job_id=str(document["job_id"]),
            node_rank=int(document["node_rank"]),
            hostname=str(document["hostname"]),
            trace_name=str(document["trace_name"]),
            world_size=int(document["world_size"]),
            ranks=ranks,
            files=files,
            created_unix_s=float(document["created_unix_s"]),
        )


def _safe_path(text: str) -> str:
    """``text`` if it is a relative path that stays inside its folder."""
    path = PurePosixPath(str(text))
    if not path.parts or path.is_absolute() or ".." in path.parts or "\\" in str(text):
        raise ValueError(f"unsafe path in manifest: {text!r}")
    return path.as_posix()


__all__ = [
    "FORMAT",
    "MANIFEST_NAME",
    "PACK_ROOT",
    "Chunk",
    "NodeManifest",
    "PackedFile",
    "RankRecord",
    "node_folder",
]

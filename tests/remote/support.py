"""Helpers of the remote tests: a node's log folder served the way the dashboard serves it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ncompass.remote.address import Cluster
from ncompass.remote.dashboard import FileMissingError, NodeInfo


class FolderDashboard:
    """The three dashboard endpoints a fetch uses, answered from a local folder.

    The real endpoints need a Ray cluster (the cluster tests use them); this stand-in lets the
    pack and fetch edge cases (damaged chunks, interrupted fetches) run in milliseconds, and
    counts what was read.
    """

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.cluster = Cluster("http://dashboard.test:8265", "tests")
        self.reads: list[str] = []

    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo("node-a" * 8, "127.0.0.1", alive=True, is_head=True, resources={})]

    def list_files(self, node_id: str, pattern: str) -> list[str]:
        return sorted(
            path.relative_to(self.logs).as_posix()
            for path in self.logs.glob(pattern)
            if path.is_file()
        )

    def read_file(self, node_id: str, filename: str) -> Iterator[bytes]:
        path = self.logs / filename
        if not path.is_file():
            raise FileMissingError(f"{filename} is not on node {node_id[:12]}")
        self.reads.append(filename)
        data = path.read_bytes()
        # In blocks, as HTTP delivers it.
        for start in range(0, len(data), 1000):
            yield data[start : start + 1000]

"""Packing on a node and fetching home: exact bytes, resumable, nothing overwritten."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ncompass._format import format_size
from ncompass.remote.errors import RemoteError
from ncompass.remote.fetch import ChunkProgress, fetch_job
from ncompass.remote.manifest import NodeManifest, RankRecord, node_folder
from ncompass.remote.pack import pack_outputs, write_manifest
from ncompass.remote.submission import describe_fetch
from tests.remote.support import FolderDashboard

JOB = "demo-20260101-000000-abcd"


def _pack(logs: Path, files: dict[str, bytes], *, chunk_bytes: int = 1024, node: int = 0) -> Path:
    """Pack ``files`` as node ``node`` of JOB would, into a fake Ray log folder."""
    run = logs / node_folder(JOB, node) / "run"
    outputs = []
    for name, data in files.items():
        path = run / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        outputs.append((path, name))
    folder = logs / node_folder(JOB, node)
    packed = pack_outputs(outputs, folder, chunk_bytes=chunk_bytes)
    manifest = NodeManifest(
        job_id=JOB,
        node_rank=node,
        hostname="node",
        trace_name="demo",
        world_size=1,
        ranks=(RankRecord(0, 0, 0, "demo.json"),),
        files=packed,
        created_unix_s=time.time(),
    )
    write_manifest(manifest, folder)
    return folder


def _trace(events: int) -> bytes:
    body = [
        {"ph": "X", "name": f"op{i}", "ts": i, "dur": 1, "pid": 1, "tid": 1} for i in range(events)
    ]
    return json.dumps({"traceEvents": body}).encode()


def test_files_come_home_byte_for_byte_gzip_or_not(tmp_path: Path) -> None:
    files = {
        "demo.json": _trace(2000),
        "demo.ncompass.json": b'{"exit_code": 0}',
        "rank0/matmul.json": _trace(10),
        "already.json.gz": gzip.compress(_trace(300)),
        "empty.txt": b"",
    }
    folder = _pack(tmp_path / "logs", files)
    manifest = NodeManifest.from_json((folder / "manifest.json").read_bytes())
    encodings = {item.path: item.encoding for item in manifest.files}
    assert encodings["demo.json"] == "gzip" and encodings["already.json.gz"] == "identity"
    big = next(item for item in manifest.files if item.path == "demo.json")
    assert len(big.chunks) > 1 and big.packed_size < big.size / 4
    report = fetch_job(FolderDashboard(tmp_path / "logs"), JOB, tmp_path / "home")
    for name, data in files.items():
        assert (tmp_path / "home" / name).read_bytes() == data
    assert report.rank_traces() == [(0, tmp_path / "home" / "demo.json")]
    # Only the job's files: no lock, no partial downloads.
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == [
        "already.json.gz",
        "demo.json",
        "demo.ncompass.json",
        "empty.txt",
        "rank0",
    ]


class SlowDashboard(FolderDashboard):
    """Reads take a while, so fetches started together overlap."""

    def read_file(self, node_id: str, filename: str) -> Iterator[bytes]:
        time.sleep(0.01)
        yield from super().read_file(node_id, filename)


def test_fetches_of_one_job_at_once_take_turns_and_leave_one_copy(tmp_path: Path) -> None:
    files = {"demo.json": os.urandom(4000) + _trace(200), "demo.ncompass.json": b"{}"}
    _pack(tmp_path / "logs", files, chunk_bytes=512)
    home = tmp_path / "home"
    with ThreadPoolExecutor(4) as pool:  # separate opens: flock serialises threads too
        reports = list(
            pool.map(lambda _: fetch_job(SlowDashboard(tmp_path / "logs"), JOB, home), range(4))
        )
    assert sum(len(report.written) for report in reports) == 2  # the others found them there
    assert all(not report.diverted for report in reports)
    assert sorted(p.name for p in home.iterdir()) == ["demo.json", "demo.ncompass.json"]
    assert (home / "demo.json").read_bytes() == files["demo.json"]


def test_an_interrupted_fetch_resumes_at_the_first_missing_chunk(tmp_path: Path) -> None:
    files = {"demo.json": os.urandom(6000) + _trace(500)}  # random bytes: many chunks
    folder = _pack(tmp_path / "logs", files, chunk_bytes=1024)
    total = len(NodeManifest.from_json((folder / "manifest.json").read_bytes()).files[0].chunks)
    seen: list[ChunkProgress] = []

    def interrupt_after_three(event: ChunkProgress) -> None:
        seen.append(event)
        if len(seen) == 3:
            raise KeyboardInterrupt

    dashboard = FolderDashboard(tmp_path / "logs")
    with pytest.raises(KeyboardInterrupt):
        fetch_job(dashboard, JOB, tmp_path / "home", on_chunk=interrupt_after_three)
    assert not (tmp_path / "home" / "demo.json").exists()
    dashboard.reads.clear()
    report = fetch_job(dashboard, JOB, tmp_path / "home")
    assert report.chunks_reused == 3 and report.chunks_downloaded == total - 3
    chunk_reads = [name for name in dashboard.reads if "/chunks/" in name]
    assert len(chunk_reads) == total - 3
    assert (tmp_path / "home" / "demo.json").read_bytes() == files["demo.json"]
    assert not (tmp_path / "home" / ".partial").exists()


def test_a_half_written_chunk_is_downloaded_again(tmp_path: Path) -> None:
    files = {"demo.json": os.urandom(5000)}
    _pack(tmp_path / "logs", files, chunk_bytes=2048)
    staging = tmp_path / "home" / ".partial" / "node0" / "demo.json"
    staging.mkdir(parents=True)
    (staging / "00000").write_bytes(b"truncated")  # an earlier fetch died mid-chunk
    report = fetch_job(FolderDashboard(tmp_path / "logs"), JOB, tmp_path / "home")
    assert report.chunks_reused == 0
    assert (tmp_path / "home" / "demo.json").read_bytes() == files["demo.json"]


def test_nothing_already_downloaded_is_overwritten(tmp_path: Path) -> None:
    files = {"demo.json": _trace(50), "notes.txt": b"job notes"}
    _pack(tmp_path / "logs", files)
    dashboard = FolderDashboard(tmp_path / "logs")
    home = tmp_path / "home"
    fetch_job(dashboard, JOB, home)
    before = (home / "demo.json").stat()
    (home / "notes.txt").write_bytes(b"my edits")  # the user changed a fetched file

    dashboard.reads.clear()
    again = fetch_job(dashboard, JOB, home)
    assert [path.name for path in again.present] == ["demo.json"]
    assert (home / "demo.json").stat().st_mtime_ns == before.st_mtime_ns
    assert (home / "notes.txt").read_bytes() == b"my edits"
    assert again.diverted == [(home / "notes.txt", home / "notes-1.txt")]
    assert (home / "notes-1.txt").read_bytes() == b"job notes"

    third = fetch_job(dashboard, JOB, home)  # the saved-aside copy counts as already here
    assert sorted(path.name for path in third.present) == ["demo.json", "notes-1.txt"]
    assert not (home / "notes-2.txt").exists()
    assert third.local_paths["notes.txt"] == home / "notes-1.txt"
    assert describe_fetch(third) == (
        f"ncompass: nothing new to fetch: the job's 2 files ({format_size(third.total_bytes)}) "
        f"are already in {home}"
    )


def test_a_damaged_chunk_is_refused_and_not_kept(tmp_path: Path) -> None:
    folder = _pack(tmp_path / "logs", {"demo.json": os.urandom(3000)}, chunk_bytes=1024)
    chunk = sorted((folder / "chunks").iterdir())[1]
    chunk.write_bytes(b"\0" * chunk.stat().st_size)
    with pytest.raises(RemoteError, match=r"arrived damaged .*run the fetch again"):
        fetch_job(FolderDashboard(tmp_path / "logs"), JOB, tmp_path / "home")
    staged = sorted(
        p.name for p in (tmp_path / "home" / ".partial" / "node0" / "demo.json").iterdir()
    )
    assert staged == ["00000"]  # the good chunk stays for the next attempt; the bad one does not
    assert not (tmp_path / "home" / "demo.json").exists()


def test_a_job_without_packs_says_why(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    with pytest.raises(RemoteError, match=r"has no packed traces .* still running"):
        fetch_job(FolderDashboard(tmp_path / "logs"), JOB, tmp_path / "home")


def test_manifests_cannot_write_outside_the_job_folder() -> None:
    bad = {
        "format": "ncompass-pack/1",
        "job_id": JOB,
        "node_rank": 0,
        "hostname": "h",
        "trace_name": "t",
        "world_size": 1,
        "ranks": [],
        "files": [
            {"path": "../../.bashrc", "size": 1, "sha256": "0", "encoding": "gzip", "chunks": []}
        ],
        "created_unix_s": 0,
    }
    with pytest.raises(ValueError, match="unsafe path"):
        NodeManifest.from_json(json.dumps(bad).encode())


def test_every_chunk_and_file_carries_its_checksum(tmp_path: Path) -> None:
    data = _trace(100)
    folder = _pack(tmp_path / "logs", {"demo.json": data})
    (item,) = NodeManifest.from_json((folder / "manifest.json").read_bytes()).files
    assert item.sha256 == hashlib.sha256(data).hexdigest() and item.size == len(data)
    for chunk in item.chunks:
        assert hashlib.sha256((folder / chunk.name).read_bytes()).hexdigest() == chunk.sha256


class _Flaky(FolderDashboard):
    """Damages the first transfer of every chunk, as a dropped connection would."""

    def __init__(self, logs: Path) -> None:
        super().__init__(logs)
        self.damaged: set[str] = set()

    def read_file(self, node_id: str, filename: str) -> Iterator[bytes]:
        if "/chunks/" in filename and filename not in self.damaged:
            self.damaged.add(filename)
            yield b"\0" * 10  # cut short
            return
        yield from super().read_file(node_id, filename)


def test_a_transfer_damaged_once_is_tried_again(tmp_path: Path) -> None:
    files = {"demo.json": os.urandom(3000)}
    _pack(tmp_path / "logs", files, chunk_bytes=1024)
    dashboard = _Flaky(tmp_path / "logs")
    report = fetch_job(dashboard, JOB, tmp_path / "home")
    assert (tmp_path / "home" / "demo.json").read_bytes() == files["demo.json"]
    assert report.chunks_downloaded == len(dashboard.damaged) == 3

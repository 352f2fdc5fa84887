"""Uploaded traces and job results on disk, under one size budget and one retention time.

Items are named by random ids (never by a path a client sends), live under
``<root>/uploads/<id>/`` and ``<root>/results/<id>/``, and are deleted when they expire or when
a new item needs room: oldest first, never one a queued or running job still reads. The service
deletes only the folders it created (see :mod:`ncompass.service.storage_folder`).
"""

from __future__ import annotations

import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from ncompass.service.inflated_size import InflatedSize
from ncompass.service.limits import ServiceLimits
from ncompass.service.storage_folder import StorageFolder

ItemKind = Literal["upload", "result"]

_ID = re.compile(r"^[0-9a-f]{32}$")
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._+#@=-]")
_GZIP_MAGIC = b"\x1f\x8b"
_MAX_NAME_LENGTH = 120
_CLAIM_STEP = 8 * 1024 * 1024


class StorageFull(Exception):
    """The budget has no room left for an item, even after deleting everything unused."""


class NotATrace(Exception):
    """An upload does not start like a Chrome/Kineto trace (JSON or gzip)."""


@dataclass
class StoredItem:
    """One upload or result on disk."""

    item_id: str
    kind: ItemKind
    path: Path
    size: int
    created: float
    gzip: bool = False


def new_id() -> str:
    """A fresh, unguessable id (32 hex digits)."""
    return uuid.uuid4().hex


def is_id(text: str) -> bool:
    """Whether ``text`` has the shape of an id (so it can never name a path)."""
    return bool(_ID.match(text))


def safe_file_name(name: str | None, default: str) -> str:
    """The last component of a client's file name, with only harmless characters kept."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = _UNSAFE_NAME_CHARS.sub("_", base).lstrip(".")[:_MAX_NAME_LENGTH]
    return base or default


class TraceStore:
    """The service's files: uploads and results, bounded in bytes and age.

    Args:
        root: Folder of the store; the item folders a service wrote there are deleted on start
            and by :meth:`clear` (items are only known to the process that wrote them), and a
            folder holding anything else is refused.
        limits: The byte budget and retention time.
        clock: Seconds since the epoch (tests pass their own).

    Raises:
        StorageFolderError: ``root`` holds files the service did not write.
    """

    def __init__(
        self, root: Path, limits: ServiceLimits, clock: Callable[[], float] = time.time
    ) -> None:
        self.root = root
        self.limits = limits
        self._clock = clock
        self._items: dict[str, StoredItem] = {}
        self._pins: dict[str, int] = {}
        # Bytes promised to uploads still arriving (counted in the budget before they commit).
        self._claims: dict[str, int] = {}
        self._lock = threading.Lock()
        self.folder = StorageFolder.open(root)

    def clear(self) -> None:
        """Delete every upload and result (when the service stops)."""
        with self._lock:
            self._items.clear()
            self._claims.clear()
            self.folder.clear()

    @property
    def used_bytes(self) -> int:
        """Bytes of every item kept now."""
        with self._lock:
            return sum(item.size for item in self._items.values())

    def open_upload(self, name: str | None) -> UploadSink:
        """Start receiving a trace; the client's ``name`` only becomes the file's base name."""
        item_id = new_id()
        folder = self.folder.record("uploads", item_id)
        return UploadSink(self, item_id, folder / safe_file_name(name, "trace.json"))

    def reserve_result(self, job_id: str, name: str) -> Path:
        """Where a job writes its result (registered by :meth:`commit_result`)."""
        folder = self.folder.record("results", job_id)
        return folder / safe_file_name(name, "result.json")

    def commit_result(self, job_id: str, path: Path) -> StoredItem:
        """Register a written result, making room for it by deleting older unused items."""
        item = StoredItem(job_id, "result", path, path.stat().st_size, self._clock())
        with self._lock:
            self._make_room(item.size, keep=job_id)
            self._items[job_id] = item
        return item

    def discard_result(self, job_id: str) -> None:
        """Drop whatever a failed job left in its result folder."""
        with self._lock:
            if job_id not in self._items:
                shutil.rmtree(self.root / "results" / job_id, ignore_errors=True)

    def get(self, item_id: str, kind: ItemKind) -> StoredItem | None:
        """The item, or None when it never existed or was deleted."""
        self.sweep()
        with self._lock:
            item = self._items.get(item_id)
            return item if item is not None and item.kind == kind else None

    def pin(self, item_id: str) -> StoredItem | None:
        """Keep an upload while a job reads it; None when it is gone."""
        with self._lock:
            item = self._items.get(item_id)
            if item is None or item.kind != "upload":
                return None
            self._pins[item_id] = self._pins.get(item_id, 0) + 1
            return item

    def unpin(self, item_id: str) -> None:
        """A job no longer reads this upload."""
        with self._lock:
            count = self._pins.get(item_id, 0) - 1
            if count > 0:
                self._pins[item_id] = count
            else:
                self._pins.pop(item_id, None)

    def delete(self, item_id: str) -> bool:
        """Delete an item now (unless a job reads it); whether it was deleted."""
        with self._lock:
            if item_id not in self._items or item_id in self._pins:
                return False
            self._remove(item_id)
            return True

    def sweep(self) -> None:
        """Delete the items older than the retention time (pinned ones wait)."""
        with self._lock:
            horizon = self._clock() - self.limits.retention_s
            for item_id in [i for i, item in self._items.items() if item.created < horizon]:
                if item_id not in self._pins:
                    self._remove(item_id)

    # Called by UploadSink.

    def _claim(self, item_id: str, n_bytes: int) -> None:
        with self._lock:
            self._make_room(n_bytes, keep=item_id)
            self._claims[item_id] = n_bytes

    def _register(self, item: StoredItem) -> None:
        with self._lock:
            self._claims.pop(item.item_id, None)
            self._items[item.item_id] = item

    def _release(self, item_id: str) -> None:
        with self._lock:
            self._claims.pop(item_id, None)

    def _make_room(self, n_bytes: int, keep: str) -> None:
        """Delete expired, then oldest unused items until ``n_bytes`` more fit (lock held)."""
        horizon = self._clock() - self.limits.retention_s
        used = sum(item.size for item in self._items.values())
        used += sum(size for other, size in self._claims.items() if other != keep)
        budget = self.limits.max_storage_bytes
        for item in sorted(self._items.values(), key=lambda i: i.created):
            if item.created >= horizon and used + n_bytes <= budget:
                break
            if item.item_id in self._pins or item.item_id == keep:
                continue
            used -= item.size
            self._remove(item.item_id)
        if used + n_bytes > budget:
            raise StorageFull(
                f"the service's storage is full ({used} of {budget} bytes held by queued or "
                "running jobs and uploads in progress); retry when they finish, or restart the "
                "service with a larger --max-storage-mb"
            )

    def _remove(self, item_id: str) -> None:
        item = self._items.pop(item_id)
        shutil.rmtree(item.path.parent, ignore_errors=True)


class UploadSink:
    """Receives one upload chunk by chunk; committed only once it is complete and looks right.

    Room in the budget is claimed as the bytes arrive, so a large upload deletes old items
    only as far as it really needs.
    """

    def __init__(self, store: TraceStore, item_id: str, path: Path):
        self.store = store
        self.item_id = item_id
        self.path = path
        self.size = 0
        self._claimed = 0
        self._head = b""
        self._inflated: InflatedSize | None = None
        self._file: IO[bytes] | None = path.open("wb")

    @property
    def inflating(self) -> bool:
        """Whether the upload is gzip, each chunk inflated (and counted) as it is written."""
        return self._inflated is not None

    def write(self, chunk: bytes) -> None:
        """Append a chunk.

        Raises:
            StorageFull: The budget cannot hold the upload so far.
            InflatesTooLarge: A gzip upload inflates past ``max_inflated_bytes``.
            NotGzip: An upload that starts like gzip is not valid gzip.
        """
        if self._file is None:
            raise ValueError("write to a closed upload")
        before = self.size
        self.size += len(chunk)
        if len(self._head) < 64:
            self._head += chunk[: 64 - len(self._head)]
        if self._inflated is not None:
            self._inflated.feed(chunk)
        elif before < len(_GZIP_MAGIC) <= self.size and self._head.startswith(_GZIP_MAGIC):
            # Recognised by its first bytes: from here on every byte is inflated as it comes.
            self._inflated = InflatedSize(self.store.limits.max_inflated_bytes)
            self._inflated.feed(self._head[:before] + chunk)
        if self.size > self._claimed:
            # Claim in steps of 8 MiB (never past the upload limit) so that the budget is not
            # re-summed for every chunk.
            step = min(self._claimed + _CLAIM_STEP, self.store.limits.max_upload_bytes)
            self._claimed = max(self.size, step)
            self.store._claim(self.item_id, self._claimed)
        self._file.write(chunk)

    def commit(self) -> StoredItem:
        """Finish the upload and make it usable by jobs.

        Raises:
            NotATrace: It is empty, or neither gzip nor JSON.
        """
        self._close()
        is_gzip = self._head.startswith(_GZIP_MAGIC)
        if not is_gzip and not self._head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith((b"{", b"[")):
            self.discard()
            what = "empty" if self.size == 0 else "neither JSON nor gzip"
            raise NotATrace(
                f"the upload is {what}: send a Chrome/Kineto trace (.json or .json.gz) as the "
                "raw request body"
            )
        item = StoredItem(
            self.item_id, "upload", self.path, self.size, self.store._clock(), gzip=is_gzip
        )
        self.store._register(item)
        return item

    def discard(self) -> None:
        """Drop a failed or refused upload."""
        self._close()
        self.store._release(self.item_id)
        shutil.rmtree(self.path.parent, ignore_errors=True)

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


__all__ = [
    "NotATrace",
    "StorageFull",
    "StoredItem",
    "TraceStore",
    "UploadSink",
    "is_id",
    "new_id",
    "safe_file_name",
]

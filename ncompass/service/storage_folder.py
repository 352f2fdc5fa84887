"""The service's own folder: what it wrote there, and nothing else, is what it deletes.

``--storage-dir`` may name any folder, so the service keeps a manifest (``.ncompass-service``,
one ``uploads/ID`` or ``results/ID`` a line) of the item folders it created, written before each
folder is. It deletes only those, and refuses to start in a folder that holds anything it did
not write: a mistyped ``--storage-dir ~`` must not cost anyone a file.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path

from ncompass.errors import NcompassError

MANIFEST = ".ncompass-service"
SUBFOLDERS = ("uploads", "results")
_ENTRY = re.compile(r"^(uploads|results)/[0-9a-f]{32}$")


class StorageFolderError(NcompassError):
    """The storage folder holds files the service did not write, or cannot be used."""


class StorageFolder:
    """The storage folder and the manifest of the item folders the service created in it.

    Opening one checks the folder (see :meth:`open`); leftovers of an earlier run that the
    manifest lists are deleted then.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._manifest = root / MANIFEST
        self._lock = threading.Lock()

    @classmethod
    def open(cls, root: Path) -> StorageFolder:
        """Take ``root`` (created when missing) for the service, empty of earlier items.

        Raises:
            StorageFolderError: ``root`` holds something the service did not write, or its
                ``uploads``/``results`` is a symbolic link or not a folder.
        """
        folder = cls(root)
        try:
            root.mkdir(parents=True, exist_ok=True)
            folder._check()
            folder.clear()
            for sub in SUBFOLDERS:
                (root / sub).mkdir(exist_ok=True)
        except OSError as error:
            raise StorageFolderError(
                f"--storage-dir {root}: cannot use it ({error.strerror or error})"
            ) from None
        return folder

    def record(self, kind: str, item_id: str) -> Path:
        """Note an item folder in the manifest, then create it; returns the folder."""
        entry = f"{kind}/{item_id}"
        with self._lock, self._manifest.open("a", encoding="ascii") as manifest:
            manifest.write(entry + "\n")
        folder = self.root / entry
        folder.mkdir(exist_ok=True)
        return folder

    def clear(self) -> None:
        """Delete every item folder the manifest lists, then the empty subfolders and manifest.

        Anything else (a file someone put there while the service ran) is left where it is.
        """
        with self._lock:
            for entry in self._entries():
                path = self.root / entry
                if path.is_symlink():
                    path.unlink()
                else:
                    shutil.rmtree(path, ignore_errors=True)
            for sub in SUBFOLDERS:
                path = self.root / sub
                if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                    path.rmdir()
            self._manifest.unlink(missing_ok=True)

    def _entries(self) -> list[str]:
        try:
            lines = self._manifest.read_text(encoding="ascii", errors="replace").splitlines()
        except FileNotFoundError:
            return []
        # Only lines of the exact shape count: an edited manifest cannot name another path.
        return [line for line in lines if _ENTRY.match(line)]

    def _check(self) -> None:
        ours = set(self._entries())
        for entry in sorted(os.listdir(self.root)):
            path = self.root / entry
            if entry == MANIFEST and path.is_file() and not path.is_symlink():
                continue
            if entry not in SUBFOLDERS:
                raise self._foreign(entry)
            if path.is_symlink() or not path.is_dir():
                what = "a symbolic link" if path.is_symlink() else "not a folder"
                raise StorageFolderError(
                    f"--storage-dir {self.root}: {entry} is {what}; the service keeps its files "
                    f"in a real {entry} folder of its own: remove {path} or give another folder"
                )
            for item in sorted(os.listdir(path)):
                if f"{entry}/{item}" not in ours:
                    raise self._foreign(f"{entry}/{item}")

    def _foreign(self, entry: str) -> StorageFolderError:
        return StorageFolderError(
            f"--storage-dir {self.root} holds {entry}, which ncompass serve did not write; "
            "the service deletes what it stores there, so give it an empty or new folder"
        )


__all__ = ["MANIFEST", "SUBFOLDERS", "StorageFolder", "StorageFolderError"]

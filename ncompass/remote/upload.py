"""The upload: the files of one folder that go to the cluster, checked for size, zipped.

The folder is walked once; ``.gitignore`` / ``.ncompassignore`` rules (see :mod:`.ignore`) and
a few defaults (``.git``, virtual environments, ``__pycache__``) decide what stays home, and
ignored folders are never entered. The zip is deterministic (sorted names, fixed timestamps),
so the same files give the same archive and Ray reuses an upload it already has.
"""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ncompass._format import format_size
from ncompass.remote.errors import RemoteError, UploadTooLargeError
from ncompass.remote.ignore import IgnoreRules

# Lowest precedence: a user's ignore file can re-include any of these with "!".
DEFAULT_IGNORES = (".venv/", "venv/", "__pycache__/", "*.py[cod]", ".mypy_cache/", ".ruff_cache/")
# Never uploaded, whatever the ignore files say.
NEVER_UPLOADED = frozenset({".git", ".hg", ".svn"})
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_COPY_BLOCK = 1 << 20


@dataclass(frozen=True)
class UploadFile:
    """One file to upload.

    Attributes:
        relative: Its path inside the upload, ``/``-separated.
        path: Where it is on this machine.
        size: Its size in bytes.
        mode: Its permission bits (kept, so scripts stay executable).
    """

    relative: str
    path: Path
    size: int
    mode: int = 0o644


@dataclass
class Upload:
    """The files of one folder that will be uploaded.

    Attributes:
        root: The upload folder.
        files: The files kept by the ignore rules, sorted by path.
        skipped: Paths left out for a reason other than an ignore rule (folder links, broken
            links, sockets), with the reason.
    """

    root: Path
    files: list[UploadFile]
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        """The summed size of the files (before compression)."""
        return sum(item.size for item in self.files)

    def biggest(self, count: int = 5) -> list[UploadFile]:
        """The ``count`` largest files."""
        return sorted(self.files, key=lambda item: (-item.size, item.relative))[:count]


def collect_upload(root: Path, *, exclude: Iterable[Path] = ()) -> Upload:
    """The files of ``root`` that the ignore rules keep.

    Args:
        root: The upload folder.
        exclude: Folders inside ``root`` to leave out whatever the rules say (the local trace
            folder, so old traces do not travel).

    Raises:
        RemoteError: ``root`` is not a folder.
    """
    root = root.resolve()
    if not root.is_dir():
        raise RemoteError(f"{root}: the upload folder does not exist or is not a folder")
    excluded = {path.resolve() for path in exclude}
    rules = IgnoreRules().then(DEFAULT_IGNORES).then(_git_info_exclude(root))
    upload = Upload(root, [])
    _walk(root, "", rules.below(root, ""), excluded, upload)
    upload.files.sort(key=lambda item: item.relative)
    return upload


def check_size(upload: Upload, limit_bytes: int, *, limit_hint: str) -> None:
    """Refuse an upload over ``limit_bytes``, naming its biggest files.

    Args:
        upload: The collected upload.
        limit_bytes: The limit.
        limit_hint: How the user raises the limit (a flag, a setting).

    Raises:
        UploadTooLargeError: the upload is over the limit.
    """
    total = upload.total_bytes
    if total <= limit_bytes:
        return
    biggest = ", ".join(f"{item.relative} ({format_size(item.size)})" for item in upload.biggest())
    raise UploadTooLargeError(
        f"the upload folder {upload.root} holds {format_size(total)} in {len(upload.files)} "
        f"files after .gitignore and .ncompassignore, over the {format_size(limit_bytes)} "
        f"limit. Biggest: {biggest}. Add what the job does not need to "
        f"{upload.root / '.ncompassignore'}, upload a smaller folder (--upload-dir), "
        f"or {limit_hint}"
    )


def write_archive(upload: Upload, extra: Mapping[str, bytes], destination: Path) -> Path:
    """Zip the upload plus ``extra`` files (path inside the zip → content) deterministically.

    Raises:
        RemoteError: a file cannot be read (it is named), or the zip cannot be written.
    """
    entries: list[tuple[str, UploadFile | bytes]] = [(item.relative, item) for item in upload.files]
    entries.extend(extra.items())
    entries.sort(key=lambda entry: entry[0])
    try:
        with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
            for name, content in entries:
                info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                mode = content.mode if isinstance(content, UploadFile) else 0o644
                info.external_attr = (stat.S_IFREG | mode) << 16
                if isinstance(content, bytes):
                    archive.writestr(info, content)
                    continue
                try:
                    with (
                        content.path.open("rb") as source,
                        archive.open(info, "w", force_zip64=content.size > 1 << 31) as target,
                    ):
                        shutil.copyfileobj(source, target, _COPY_BLOCK)
                except OSError as error:
                    raise RemoteError(
                        f"{content.path}: cannot read it for the upload ({error.strerror}); "
                        f"add it to {upload.root / '.ncompassignore'} if the job does not need it"
                    ) from None
    except OSError as error:
        raise RemoteError(f"{destination}: cannot write the upload ({error.strerror})") from None
    return destination


def _walk(
    folder: Path, relative: str, rules: IgnoreRules, excluded: set[Path], upload: Upload
) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as error:
        upload.skipped.append((relative or ".", f"cannot list it ({error.strerror})"))
        return
    for entry in entries:
        path = f"{relative}/{entry.name}" if relative else entry.name
        if entry.name in NEVER_UPLOADED:
            continue
        try:
            is_folder = entry.is_dir(follow_symlinks=False)
            if is_folder and Path(entry.path).resolve() in excluded:
                continue
            if rules.ignored(path, is_folder) is not None:
                continue
            if is_folder:
                _walk(Path(entry.path), path, rules.below(Path(entry.path), path), excluded, upload)
                continue
            if entry.is_symlink() and Path(entry.path).is_dir():
                upload.skipped.append((path, "a link to a folder (not followed)"))
                continue
            info = entry.stat(follow_symlinks=True)
        except OSError:
            upload.skipped.append((path, "a broken link or unreadable entry"))
            continue
        if not stat.S_ISREG(info.st_mode):
            upload.skipped.append((path, "not a regular file"))
            continue
        upload.files.append(
            UploadFile(path, Path(entry.path), info.st_size, stat.S_IMODE(info.st_mode))
        )


def _git_info_exclude(root: Path) -> Sequence[str]:
    try:
        return (root / ".git" / "info" / "exclude").read_text(encoding="utf-8").splitlines()
    except OSError:
        return ()


__all__ = [
    "DEFAULT_IGNORES",
    "NEVER_UPLOADED",
    "Upload",
    "UploadFile",
    "check_size",
    "collect_upload",
    "write_archive",
]

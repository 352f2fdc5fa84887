"""Files that appear whole or not at all, and the SHA-256 of a file.

Every file ncompass writes for later reading is written under a temporary name in the same
folder and renamed over its target only once complete, so a reader, a second process or a crash
sees the old file or the new one, never half of one. The temporary name,
``.NAME.PID-THREAD.tmp.SUFFIX`` (:func:`temporary_path`), is hidden, unique to the process and
thread writing it, and ends in the target's suffix, so writers that pick a format by extension
(torch's gzip export, ``.gz`` traces) write the same format. It is removed on any exception,
``KeyboardInterrupt`` included. Nothing is written through a symlink: the temporary is
created exclusively (a symlink planted at its predictable name is removed, never followed), and
the rename replaces a symlink at the target itself, never the file it points to.

A name can be reserved before its file exists by a hidden ``.NAME.claim`` file
(:func:`reservation_path`, written by ``capture.trace_files``); the writer that puts the file
in place removes the reservation, so a crash leaves only the hidden reservation, never an
empty file under the real name.

fsync policy, decided once: ``fsync=True`` flushes the data to disk before the rename, so the
file survives a power cut or a kernel crash whole instead of empty. Pass it for small state
files that later runs rely on and that are costly or impossible to rebuild: the remote
settings (they hold a token), the autotune cache, the session store, a pack's manifest. Do not
pass it for traces, downloads and compiled output: they are large (an fsync can take seconds)
and a crash loses the run they belong to anyway; nor for the import hook's bytecode cache,
where a lost entry is only a miss (CPython does not fsync its pycs either).

Standard library only: every package may import this module, the cluster-side launcher too.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

_HASH_BLOCK = 1 << 20
_NEW_FILE_MODE = 0o666  # narrowed by the umask, as for any file open() creates
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows, where O_EXCL alone suffices


def reservation_path(path: Path) -> Path:
    """The hidden file that reserves ``path``'s name until the file itself is written."""
    return path.with_name(f".{path.name}.claim")


def temporary_path(path: Path) -> Path:
    """The name ``path`` is written under before it is renamed into place."""
    unique = f"{os.getpid()}-{threading.get_ident()}"
    return path.with_name(f".{path.name}.{unique}.tmp{path.suffix}")


@contextlib.contextmanager
def atomic_output(path: Path, *, fsync: bool = False, mode: int | None = None) -> Iterator[Path]:
    """A temporary path to write ``path``'s content to; it replaces ``path`` on success.

    For writers that create the file themselves (an exporter, a compiler, a download loop).
    The parent folder is created if missing. On any exception the temporary is removed and
    ``path`` is left as it was.

    Args:
        path: The file to write.
        fsync: Flush the file to disk before the rename (see the module's policy).
        mode: Permission bits the file gets (default: as created, narrowed by the umask). A
            file that must never be readable by others is written with :func:`write_atomic`,
            which creates it with ``mode`` from the first byte.

    Yields:
        The temporary path, in ``path``'s folder.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with removed_on_error(temporary_path(path)) as temporary:
        _remove_leftover(temporary)  # the writer may open it without O_NOFOLLOW
        yield temporary
        if fsync:
            descriptor = os.open(temporary, os.O_RDWR)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        if mode is not None:  # after the fsync: the mode may forbid writing
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(reservation_path(path))  # the name is held by the file itself now


def _remove_leftover(path: Path) -> None:
    """Remove what a crashed writer (or anyone) left at a temporary's name, a symlink too."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


@contextlib.contextmanager
def removed_on_error(path: Path) -> Iterator[Path]:
    """``path``, deleted if the block raises: a temporary file that must not outlive a failure.

    For temporaries that end other than by replacing a file (:func:`move_if_absent`).
    """
    try:
        yield path
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def write_atomic(
    path: Path, data: bytes | str, *, fsync: bool = False, mode: int | None = None
) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically.

    Args:
        path: The file to write; its folder is created if missing.
        data: The whole content.
        fsync: Flush to disk before the rename (see the module's policy).
        mode: Permission bits of the file, set before any byte is written.

    Returns:
        ``path``.

    Raises:
        OSError: The folder or file cannot be written; ``path`` is unchanged.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW | getattr(os, "O_BINARY", 0)
    with atomic_output(path, mode=mode) as temporary:
        descriptor = os.open(temporary, flags, _NEW_FILE_MODE if mode is None else mode & 0o777)
        if mode is not None:
            os.chmod(temporary, mode)  # exactly: open() narrows it by the umask
        with open(descriptor, "wb") as handle:
            handle.write(payload)
            if fsync:  # through this descriptor: ``mode`` may forbid opening it for writing
                handle.flush()
                os.fsync(handle.fileno())
    return path


def move_if_absent(source: Path, target: Path) -> bool:
    """Rename ``source`` to ``target`` unless a file is already there; True if it moved.

    The target appears whole or not at all: ``source`` is hard-linked to it (which fails when
    the name exists), so of two processes moving files to the same name exactly one wins and
    nothing is overwritten. Where hard links are not supported, the name is claimed with an
    exclusive create, then replaced.

    Raises:
        OSError: ``target`` cannot be created (other than already existing).
    """
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError:
        try:
            descriptor = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        os.close(descriptor)
        os.replace(source, target)
        return True
    os.unlink(source)
    return True


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes, as hex (read in blocks: the file may be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


__all__ = [
    "atomic_output",
    "move_if_absent",
    "removed_on_error",
    "reservation_path",
    "sha256_file",
    "temporary_path",
    "write_atomic",
]

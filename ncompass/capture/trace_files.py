"""Where traces go and what they are called.

Trace files are never overwritten by accident: a default name that exists gets a numeric
suffix (``attn.json``, ``attn-1.json``, ...), and a name the user chose is refused when its
trace or its sidecar exists unless replacing them was asked for (``--force-overwrite``). Names
are claimed atomically (an exclusive create), so concurrent processes writing into one folder
never collide. A run's trace name is reserved by a hidden ``.NAME.json.claim`` file holding the
claiming process's id, never by an empty file at the trace's own name: a run that crashes
leaves no empty "trace", and a reservation whose process is gone does not block the next run.
Every path is made absolute when the run starts, so a program that changes its working folder
(Hydra does) writes where the run said it would.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from ncompass import environment_variables
from ncompass._files import (
    atomic_output,
    move_if_absent,
    reservation_path,
    temporary_path,
    write_atomic,
)
from ncompass.errors import CaptureError
from ncompass.run_files import SIDECAR_SUFFIX, TRACE_SUFFIX, processes_folder, sidecar_path

TRACE_DIR_ENV = environment_variables.NCOMPASS_TRACE_DIR
DEFAULT_TRACE_DIR = "traces"

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


class TraceExistsError(CaptureError):
    """A trace of the name asked for exists, and replacing it was not asked for."""


class TraceFolderError(CaptureError):
    """The trace folder cannot be created or written to."""


def trace_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The trace folder: ``explicit``, else ``$NCOMPASS_TRACE_DIR``, else ``traces``."""
    chosen = explicit or os.environ.get(TRACE_DIR_ENV) or DEFAULT_TRACE_DIR
    return Path(os.path.abspath(chosen))  # fixed now: the program may change its folder


def check_trace_name(name: str) -> str:
    """A trace name the user chose, used as given (spaces and any letters kept).

    Raises:
        CaptureError: the name cannot be a file name (empty, ``.``/``..``, or holds ``/``, a
            NUL or a newline).
    """
    bad = next((c for c in ("/", "\x00", "\n", "\r") if c in name), None)
    if name in ("", ".", "..") or bad is not None or (os.sep != "/" and os.sep in name):
        why = f"it holds {bad!r}" if bad is not None else "it is not a file name"
        raise CaptureError(
            f"--trace-name {name!r} cannot name a trace file ({why}); give a plain name, and "
            "the folder with --output-dir"
        )
    return name


def prepare_trace_folder(folder: Path) -> Path:
    """Create ``folder`` if missing and check a file can be created in it, before a run starts.

    Raises:
        TraceFolderError: one line naming the folder and the cause.
    """
    if "\n" in str(folder) or "\r" in str(folder):  # the torch profiler's writer drops them
        raise TraceFolderError(
            f"the trace folder {str(folder)!r} has a line break in its name, which the "
            "profiler cannot write to; choose another --output-dir"
        )
    _make_folder(folder)
    try:  # what a file system mounted read-only or a full quota says only on a write
        probe = folder / f".ncompass-probe.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(probe)  # a probe this pid left when killed: never a reason to refuse
        descriptor = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise TraceFolderError(
            f"cannot write traces to {folder}: {describe_os_error(error)}; choose another "
            "--output-dir (or NCOMPASS_TRACE_DIR)"
        ) from None
    return folder


def describe_os_error(error: OSError) -> str:
    """``No space left on device (errno 28)``: the cause of an OSError, without its paths."""
    if error.errno is None:
        return str(error)
    return f"{os.strerror(error.errno)} (errno {error.errno})"


def trace_write_error(path: Path, error: OSError) -> CaptureError:
    """The one line saying a trace could not be written: the path, the cause, what to do."""
    advice = {
        errno.ENOSPC: "free space or choose another --output-dir",
        errno.EDQUOT: "free space or choose another --output-dir",
        errno.EROFS: "choose a writable --output-dir",
        errno.EACCES: "choose a writable --output-dir",
        errno.EISDIR: "remove that folder or choose another --trace-name",
    }.get(error.errno or 0, "choose another --output-dir")
    return CaptureError(f"could not write the trace {path}: {describe_os_error(error)}; {advice}")


def write_trace(path: Path, export: Callable[[str], object]) -> Path:
    """Write a trace through ``export(file_name)``, whole or not at all, and check it is there.

    The torch profiler's writer (Kineto's) reports no error: when the disk is full or the
    folder turned read-only, it logs a line, leaves its own ``.tmp`` file and returns. Here the
    missing file is noticed, both temporaries are removed, and the cause is said.

    Raises:
        CaptureError: one line naming ``path``, the cause and what to do; ``path`` unchanged.
    """
    try:
        with atomic_output(path) as temporary:  # ends in .gz if the output does
            kineto_partial = temporary.with_name(temporary.name + ".tmp")
            try:
                export(str(temporary))
                if not temporary.is_file():
                    raise silent_write_failure(path.parent)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(kineto_partial)
    except OSError as error:
        raise trace_write_error(path, error) from None
    return path


def silent_write_failure(folder: Path) -> OSError:
    """The likely cause when a writer that reports no errors (Kineto's) wrote no file."""
    with contextlib.suppress(OSError, AttributeError):  # no statvfs on Windows
        stats = os.statvfs(folder)
        if stats.f_flag & getattr(os, "ST_RDONLY", 1):
            return OSError(errno.EROFS, os.strerror(errno.EROFS))
        if stats.f_bavail * stats.f_frsize < _LOW_SPACE_BYTES:
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return OSError(None, "the profiler wrote no file (see its message above)")


_LOW_SPACE_BYTES = 4 << 20  # what is left when a trace of a few MB did not fit


def safe_name(name: str) -> str:
    """A trace name usable as a file name on every OS."""
    cleaned = _UNSAFE.sub("_", name).strip("._")
    return cleaned or "trace"


def timestamped_name(stem: str) -> str:
    """``stem-YYYYmmdd-HHMMSS``: the default trace name of a run."""
    return f"{safe_name(stem)}-{time.strftime('%Y%m%d-%H%M%S')}"


def claim_trace_path(
    folder: Path,
    name: str,
    suffix: str = TRACE_SUFFIX,
    *,
    exact: bool = False,
    replace: bool = False,
    reserve: bool = False,
) -> Path:
    """Claim ``folder/name.json`` (or ``name-N.json`` if taken) for a trace about to be written.

    A name is taken when a file (or symlink, or folder) of it exists, when its sidecar or its
    processes folder exists, or while a live process reserves it. The caller writes the trace
    to a temporary file and renames it over the claimed path
    (:func:`ncompass._files.atomic_output`), and calls :func:`release_claim` if the run ends
    without a trace.

    Args:
        folder: The trace folder (created if missing).
        name: The trace name, without the suffix (sanitised unless ``exact``).
        suffix: The file's suffix.
        exact: The name is the user's choice: claim exactly it, never ``name-N``.
        replace: With ``exact``, an existing trace and sidecar of that name may be replaced:
            the old files stay until the new ones are renamed over them.
        reserve: Reserve the name with a hidden ``.NAME.claim`` file instead of creating the
            trace's own file empty (a crash then leaves no empty trace).

    Raises:
        TraceExistsError: ``exact`` without ``replace`` and the trace or its sidecar exists
            (left unchanged), or a folder is at the trace's path.
        TraceFolderError: the folder cannot be created.
    """
    _make_folder(folder)
    base = check_trace_name(name) if exact else safe_name(name)
    for attempt in range(1 if exact else 100_000):
        candidate = folder / (f"{base}{suffix}" if attempt == 0 else f"{base}-{attempt}{suffix}")
        if exact and os.path.isdir(candidate):
            raise TraceExistsError(
                f"{candidate} is a folder, not a trace, and was left unchanged; remove it or "
                "choose another --trace-name"
            )
        if exact and replace:
            if suffix == TRACE_SUFFIX and os.path.islink(processes_folder(candidate)):
                raise TraceExistsError(
                    f"{processes_folder(candidate)} is a symlink, which the run's processes "
                    "would write their traces through; remove it or choose another --trace-name"
                )
            if reserve:
                _reserve(candidate, steal=True)
            return candidate
        taken = _taken_by(candidate, suffix)
        if taken is None and (_reserve(candidate) if reserve else _create_empty(candidate)):
            return candidate
        if exact and taken == reservation_path(candidate):
            raise TraceExistsError(
                f"{candidate} is being written by another run (its reservation {taken} names "
                "a running process); wait for it, choose another --trace-name, or pass "
                "--force-overwrite"
            )
        if exact:
            raise TraceExistsError(
                f"{taken or candidate} already exists and was left unchanged; choose another "
                "--trace-name, or pass --force-overwrite to replace it"
            )
    raise TraceFolderError(f"{folder}: too many traces named {base}")


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise TraceFolderError(
            f"cannot use {folder} as the trace folder: a file is in its place; choose "
            "another --output-dir (or NCOMPASS_TRACE_DIR)"
        ) from None
    except OSError as error:
        raise TraceFolderError(
            f"cannot create the trace folder {folder}: {describe_os_error(error)}; choose "
            "another --output-dir (or NCOMPASS_TRACE_DIR)"
        ) from None


def _taken_by(candidate: Path, suffix: str) -> Path | None:
    """The file that makes ``candidate``'s name taken, if any (symlinks are never followed)."""
    if os.path.lexists(candidate):
        return candidate
    if suffix == TRACE_SUFFIX:
        for beside in (sidecar_path(candidate), processes_folder(candidate)):
            if os.path.lexists(beside):
                return beside
    reservation = reservation_path(candidate)
    if os.path.lexists(reservation) and _holder_alive(reservation):
        return reservation
    return None


def _create_empty(candidate: Path) -> bool:
    try:  # O_EXCL: a symlink planted at the name fails too, it is never followed
        descriptor = os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    except OSError as error:
        raise TraceFolderError(
            f"cannot create {candidate}: {describe_os_error(error)}; choose another --output-dir"
        ) from None
    os.close(descriptor)
    return True


def _reserve(candidate: Path, *, steal: bool = False) -> bool:
    """Create ``candidate``'s reservation holding this process's id; False if held already.

    The reservation appears whole (written aside, then hard-linked into place), so no
    reader sees it without its id. One whose process is gone (a crash, ``kill -9``) is
    removed and taken over; with ``steal`` (the name may be replaced anyway) any one is.
    """
    reservation = reservation_path(candidate)
    try:
        pending = write_atomic(temporary_path(reservation), str(os.getpid()))
        try:
            for _ in range(2):
                if move_if_absent(pending, reservation):
                    break
                if not steal and _holder_alive(reservation):
                    return False
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(reservation)  # a dead run's: the name is free
            else:
                return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pending)
    except OSError as error:
        raise TraceFolderError(
            f"cannot reserve {candidate}: {describe_os_error(error)}; choose another --output-dir"
        ) from None
    if os.path.lexists(candidate) and not steal:  # written between the check and now
        release_claim(candidate)
        return False
    return True


def _holder_alive(reservation: Path) -> bool:
    """Whether the process named in a reservation still runs (unreadable: assume it does)."""
    try:
        pid = int(reservation.read_text().strip() or "0")
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, another user's
        return True
    return True


def release_claim(path: Path) -> None:
    """Free a name claimed by :func:`claim_trace_path` if no trace was written to it."""
    with contextlib.suppress(OSError):
        os.unlink(reservation_path(path))
    try:
        if not path.is_symlink() and path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass


__all__ = [
    "DEFAULT_TRACE_DIR",
    "SIDECAR_SUFFIX",
    "TRACE_DIR_ENV",
    "TRACE_SUFFIX",
    "TraceExistsError",
    "TraceFolderError",
    "check_trace_name",
    "claim_trace_path",
    "describe_os_error",
    "prepare_trace_folder",
    "release_claim",
    "safe_name",
    "sidecar_path",
    "silent_write_failure",
    "timestamped_name",
    "trace_dir",
    "trace_write_error",
    "write_trace",
]

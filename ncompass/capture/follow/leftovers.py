"""The follow folders of runs that died before they could remove their own.

A run removes its private folder (``ncompass-follow-*`` in the temporary directory) on every
way out it sees, SIGTERM and Ctrl-C included; a run killed by SIGKILL, or one whose
interpreter crashed, cannot. The next run removes those: a folder whose settings name a root
process that is gone (in this pid namespace, and by its start time, so a reused pid does not
keep it) belongs to no live run. A live run's folder is never removed, nor another user's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from ncompass.capture.follow.bootstrap import read_settings

FOLDER_PREFIX = "ncompass-follow-"
"""The name every run's follow folder starts with (``tempfile.mkdtemp(prefix=...)``)."""

UNREADABLE_AFTER_S = 3600.0
"""A folder without readable settings is one a run was making: removed only once this old."""


def pid_namespace() -> str | None:
    """This process's pid namespace (``pid:[N]``), when the system says; pids of runs in
    another namespace (another container sharing the temporary directory) mean nothing here."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def started_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])  # field 22 of proc(5); fields[0] is field 3
    except (IndexError, ValueError):
        return None


def remove_stale_folders(temporary: Path | None = None) -> list[Path]:
    """Remove the follow folders of runs that are gone; returns the folders removed."""
    folder = temporary if temporary is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    namespace = pid_namespace()
    try:
        candidates = list(folder.glob(f"{FOLDER_PREFIX}*"))
    except OSError:
        return removed
    for candidate in candidates:
        if _is_stale(candidate, namespace):
            shutil.rmtree(candidate, ignore_errors=True)
            if not candidate.exists():
                removed.append(candidate)
    return removed


def _is_stale(folder: Path, namespace: str | None) -> bool:
    try:
        info = folder.lstat()
    except OSError:
        return False
    if not folder.is_dir() or folder.is_symlink() or info.st_uid != os.getuid():
        return False
    try:
        settings = read_settings(str(folder))
    except (OSError, ValueError, EOFError, TypeError):
        return time.time() - info.st_mtime > UNREADABLE_AFTER_S
    pid = settings.get("root_pid")
    if not isinstance(pid, int):
        return False
    if "root_namespace" in settings and settings["root_namespace"] != namespace:
        return False  # a run in another namespace (container): its pid says nothing here
    if not alive(pid):
        return True
    ticks = settings.get("root_started_ticks")
    return ticks is not None and started_ticks(pid) not in (None, ticks)


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, ended but not yet waited for, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is a run that has ended
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[:1] != ["Z"]
    return True


__all__ = [
    "FOLDER_PREFIX",
    "UNREADABLE_AFTER_S",
    "alive",
    "pid_namespace",
    "remove_stale_folders",
    "started_ticks",
]

"""One writer per session: an exclusive lock on ``<session>/session.lock``.

Two processes writing one session would both read "no iterations yet", both run iteration 1
and both save, and one run would be lost. So a :class:`~ncompass.session.session.ProfilingSession`
that may write takes this lock before it reads the session's state, and holds it until it is
closed or collected (or its process ends: the lock is an ``flock``, which the system drops with
the process, so a crashed writer never leaves a stale lock). A second process is refused at
once, in one line naming the holder; inside one process the lock is shared, so a script may
open the same session twice.

The lock file holds the writer's process id, for the message. Where ``fcntl`` does not exist
(Windows) sessions are not locked.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ncompass.session.store import SessionError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "session.lock"

_LOCK = threading.Lock()
_HELD: dict[Path, list[int]] = {}  # lock file -> [descriptor, holders in this process]


class SessionBusyError(SessionError):
    """Another process is writing the session."""


def acquire(root: Path, name: str) -> Path:
    """Take the lock of the session folder ``root``; returns the lock file.

    Raises:
        SessionBusyError: Another process holds it (the message names it and what to do).
    """
    root.mkdir(parents=True, exist_ok=True)
    path = (root / LOCK_FILE).resolve()
    with _LOCK:
        held = _HELD.get(path)
        if held is not None:
            held[1] += 1
            return path
        if fcntl is None:  # pragma: no cover - Windows
            _HELD[path] = [-1, 1]
            return path
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 32).decode("ascii", "replace").strip()
            os.close(descriptor)
            by = f"process {holder}" if holder.isdigit() else "another process"
            raise SessionBusyError(
                f"session {name!r} ({root}) is in use by {by}; wait for it to end, or choose "
                "another --name"
            ) from None
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode("ascii"), 0)
        _HELD[path] = [descriptor, 1]
        return path


def release(path: Path) -> None:
    """Give back a lock taken with :func:`acquire` (the last holder in the process unlocks)."""
    with _LOCK:
        held = _HELD.get(path)
        if held is None:
            return
        held[1] -= 1
        if held[1] > 0:
            return
        del _HELD[path]
        if held[0] >= 0:
            os.close(held[0])  # closing the descriptor drops the flock


__all__ = ["LOCK_FILE", "SessionBusyError", "acquire", "release"]

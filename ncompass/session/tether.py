"""A session's run ends with the session: its child process dies when the session's does.

``session run`` starts every run as a child (``python -m ncompass run``, or the discovery
run), which writes into the session's folder. If the session is killed (SIGKILL, an
out-of-memory kill, a closed terminal's process group torn down unevenly) the child would go on
profiling and writing there for nobody. So the session names itself in the child's environment
(:data:`PARENT_ENV`), and the child, first thing, asks the kernel to kill it when its parent
dies (``PR_SET_PDEATHSIG`` on Linux; elsewhere a thread watches the parent's pid), then checks
that the parent has not died already. The variable is removed from the child's environment at
once: the script's own processes are not the session's runs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import MutableMapping

from ncompass import environment_variables

PARENT_ENV = environment_variables.NCOMPASS_SESSION_PARENT
_PR_SET_PDEATHSIG = 1
_WATCH_INTERVAL_S = 0.5


def tethered_environment(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a run that must end with this process."""
    return {**(os.environ if environ is None else environ), PARENT_ENV: str(os.getpid())}


def end_with_parent(environ: MutableMapping[str, str] | None = None) -> None:
    """In a session's run: die (SIGKILL) when the session that started it dies.

    Nothing happens without :data:`PARENT_ENV` (a run started by hand).
    """
    env = os.environ if environ is None else environ
    value = env.pop(PARENT_ENV, None)
    if not value or not value.isdigit():
        return
    parent = int(value)
    if not _kill_me_with_my_parent():
        threading.Thread(target=_watch, args=(parent,), name="ncompass-tether", daemon=True).start()
    if os.getppid() != parent:  # it died before the tie was made: nobody waits for this run
        _die()


def _kill_me_with_my_parent() -> bool:
    """Ask the kernel for SIGKILL when the parent dies; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    # An orphan is adopted by another process (init, a subreaper): the parent pid changes.
    while os.getppid() == parent:
        threading.Event().wait(_WATCH_INTERVAL_S)
    _die()


def _die() -> None:
    # SIGKILL, as the kernel would: the run writes nothing more (no trace on the way out).
    os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["PARENT_ENV", "end_with_parent", "tethered_environment"]

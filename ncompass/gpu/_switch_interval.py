"""A short GIL switch interval while any monitor samples, so its thread samples on time.

The sampler thread sleeps until each tick, then needs the GIL to read the backend, and reading
releases and takes it back several times (every file read, every NVML call through ctypes).
While the main thread runs Python, each take waits for the interpreter's switch interval (5 ms
by default): ten of them made a 50 ms tick take 80 ms, 12 samples a second instead of 20. With
a 0.1 ms interval the main thread hands the GIL over within 0.1 ms of being asked, and it is
only asked while the sampler waits for it, so a thread that never waits costs nothing more.

A C call that holds the GIL longer than the tick (a large ``sum`` over a ``range``) still
delays the samples behind it; the summary reports the rate achieved and notes a shortfall.
"""

from __future__ import annotations

import sys
import threading

SAMPLING_SWITCH_INTERVAL_S = 1e-4

_lock = threading.Lock()
_holders = 0
_saved: float | None = None
_set: float | None = None  # the interval as the interpreter reports it once set (in µs steps)


def shorten() -> None:
    """Shorten the switch interval until the matching :func:`restore` (calls nest)."""
    global _holders, _saved, _set
    with _lock:
        if _holders == 0:
            _saved = sys.getswitchinterval()
            _set = None
            if _saved > SAMPLING_SWITCH_INTERVAL_S:
                sys.setswitchinterval(SAMPLING_SWITCH_INTERVAL_S)
                _set = sys.getswitchinterval()
        _holders += 1


def restore() -> None:
    """Undo one :func:`shorten`; the last one puts back the interval found by the first."""
    global _holders, _saved, _set
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0:
            if _saved is not None and _set is not None and sys.getswitchinterval() == _set:
                sys.setswitchinterval(_saved)  # nobody else changed it meanwhile
            _saved = _set = None

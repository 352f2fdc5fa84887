"""A time limit on one job, enforced on the worker thread that runs it.

Threads cannot be killed, but CPython can raise an exception in another thread: it is
delivered the next time that thread runs Python code. The engine reads traces in bounded
chunks, between which it always runs Python, so a job past its limit stops within one chunk
and its worker is free for the next job. A thread waiting on a socket runs no Python, so the
block is also the thread's time budget: the providers' HTTP calls (the LLM narrative) wait at
most for what is left of the limit and then raise :class:`JobTimedOut`'s base,
:class:`TimeBudgetSpent`, themselves.
"""

from __future__ import annotations

import ctypes
import threading
from contextlib import ExitStack
from types import TracebackType

from ncompass.analysis.providers.time_budget import TimeBudgetSpent, time_budget


class JobTimedOut(TimeBudgetSpent):
    """Raised inside a job's thread when the job runs past its time limit.

    A ``BaseException``, like ``KeyboardInterrupt``: the engine's ``except Exception`` clauses
    must not turn it into a trace error. An HTTP call that runs out of the job's time raises
    its base, :class:`TimeBudgetSpent`; both mean the same to the job.
    """


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Make ``thread_id`` raise ``exception`` soon; ``None`` withdraws one not raised yet."""
    given = ctypes.py_object(exception) if exception is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), given)


class JobDeadline:
    """Raise :class:`JobTimedOut` in the current thread if the ``with`` block outlives ``limit_s``.

    After the block, nothing is raised any more: a timer that fires as the block ends is
    either delivered inside the block (and leaves it as :class:`JobTimedOut`) or withdrawn.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._lock = threading.Lock()
        self._inside = False
        self._fired = False
        self._thread_id = 0
        self._timer: threading.Timer | None = None
        self._budget = ExitStack()

    @property
    def expired(self) -> bool:
        """Whether the limit was reached while the block ran."""
        return self._fired

    def __enter__(self) -> JobDeadline:
        self._thread_id = threading.get_ident()
        self._budget.enter_context(time_budget(self.limit_s))
        self._inside = True
        self._timer = threading.Timer(self.limit_s, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._budget.close()
        with self._lock:
            self._inside = False
            if self._fired and exc_type is not JobTimedOut:
                # Fired but not delivered yet: withdraw it, or it would hit whatever this
                # thread runs next.
                _raise_in(self._thread_id, None)
        if self._fired and exc_type is None:
            raise JobTimedOut

    def _fire(self) -> None:
        with self._lock:
            if not self._inside:
                return
            self._fired = True
            _raise_in(self._thread_id, JobTimedOut)


__all__ = ["JobDeadline", "JobTimedOut"]

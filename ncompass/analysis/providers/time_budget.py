"""A time budget for everything a provider does in one thread, HTTP calls included.

The service stops a job past its time limit by raising an exception in the job's thread, but
CPython delivers it only when that thread runs Python code again: a thread blocked in a socket
read (an LLM writing its narrative for 40 s) would not see it until the answer came. So the
HTTP client of the providers reads the budget of its thread and never waits longer than what
is left of it; once it is spent, a call raises :class:`TimeBudgetSpent` instead of waiting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# The monotonic time by which the current thread's work must be done; None: no budget.
_deadline: ContextVar[float | None] = ContextVar("ncompass_time_budget", default=None)


class TimeBudgetSpent(BaseException):
    """The work ran past its time budget.

    A ``BaseException``, like ``KeyboardInterrupt``: a provider's ``except Exception`` (its
    fallback to the built-in answer) must not turn a spent budget into a slower answer.
    """


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Bound the HTTP calls made in this thread inside the block to ``seconds`` in all.

    A budget inside another one never extends it: the earlier deadline holds.
    """
    deadline = time.monotonic() + seconds
    outer = _deadline.get()
    token = _deadline.set(deadline if outer is None else min(outer, deadline))
    try:
        yield
    finally:
        _deadline.reset(token)


def remaining_s() -> float | None:
    """Seconds left of this thread's budget (0 or less: spent); None without a budget."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def within_budget(timeout_s: float) -> float:
    """``timeout_s``, shortened to what is left of this thread's budget.

    Raises:
        TimeBudgetSpent: Nothing is left.
    """
    left = remaining_s()
    if left is None:
        return timeout_s
    if left <= 0:
        raise TimeBudgetSpent
    return min(timeout_s, left)


def budget_spent() -> bool:
    """Whether this thread has a budget and it is spent."""
    left = remaining_s()
    return left is not None and left <= 0


__all__ = ["TimeBudgetSpent", "budget_spent", "remaining_s", "time_budget", "within_budget"]

"""Counts of kernel calls and PyTorch fallbacks, by op and by reason.

Every public op records one event per call: the Triton kernel ran, or the call fell back to
PyTorch for a stated reason. ``stats()`` answers "did my swap actually run the kernel?"; the
first fallback of each (op, reason) is also logged at DEBUG level on ``ncompass.kernels``.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

logger = logging.getLogger("ncompass.kernels")

_lock = threading.Lock()
_kernel_calls: Counter[str] = Counter()
_fallbacks: dict[str, Counter[str]] = {}


@dataclass(frozen=True)
class OpStats:
    """What one op did since the last reset.

    Attributes:
        kernel_calls: Calls that ran the Triton kernel.
        fallbacks: Calls that ran PyTorch instead, by reason.
    """

    kernel_calls: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)

    @property
    def fallback_calls(self) -> int:
        """Calls that fell back to PyTorch, whatever the reason."""
        return sum(self.fallbacks.values())


def record_kernel(op: str) -> None:
    """Count one call of ``op`` that runs the Triton kernel."""
    with _lock:
        _kernel_calls[op] += 1


def record_fallback(op: str, reason: str) -> None:
    """Count one call of ``op`` that falls back to PyTorch because of ``reason``."""
    with _lock:
        reasons = _fallbacks.get(op)
        if reasons is None:
            reasons = _fallbacks[op] = Counter()
        first = reason not in reasons
        reasons[reason] += 1
    if first:
        logger.debug("%s falls back to PyTorch: %s", op, reason)


def stats() -> dict[str, OpStats]:
    """A snapshot of the counts, by op name (``conv2d``, ``linear``, ...)."""
    with _lock:
        ops = set(_kernel_calls) | set(_fallbacks)
        return {
            op: OpStats(_kernel_calls.get(op, 0), dict(_fallbacks.get(op, Counter())))
            for op in sorted(ops)
        }


def reset_stats() -> None:
    """Forget every count (and log the next fallback of each reason again)."""
    with _lock:
        _kernel_calls.clear()
        _fallbacks.clear()


__all__ = ["OpStats", "record_fallback", "record_kernel", "reset_stats", "stats"]

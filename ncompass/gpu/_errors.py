"""The GPU monitor's one exception: a backend that cannot be started."""

from __future__ import annotations

from collections.abc import Sequence

from ncompass.errors import NcompassError


class GpuBackendError(NcompassError):
    """A requested monitoring backend cannot be started.

    The message lists every backend that was tried and why each failed, and says what to do.

    Args:
        message: What went wrong and what to do about it.
        attempts: ``(backend, reason)`` for each backend that was tried, in order.
    """

    def __init__(self, message: str, attempts: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.attempts: tuple[tuple[str, str], ...] = tuple(attempts)

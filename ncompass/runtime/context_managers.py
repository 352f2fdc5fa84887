"""The seed API's range context managers, ``TorchRecordContext`` and ``NvtxContext``.

They are for code users write by hand (``with TorchRecordContext("step"): ...``); rewritten
modules call :func:`ncompass.runtime.sites.bind` directly, which skips the cost of a ``with``
statement on a Python class. Both are thin wrappers over the same bound ranges, so they
record exactly what a marker with the same context would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import TracebackType

from ncompass.runtime.sites import bind


@functools.lru_cache(maxsize=4096)
def _bound_pair(
    context: str, name: str, async_safe: bool, color: str | int | None
) -> tuple[Callable[..., object], Callable[[object], object]]:
    # A loop entering `with TorchRecordContext("step")` binds the same site every time.
    return bind(context, name, async_safe=async_safe, color=color)


class _RangeContext:
    """A reusable ``with`` block around one bound range."""

    _context = "noop"

    def __init__(
        self,
        name: str,
        *,
        values: Mapping[str, object] | None = None,
        color: str | int | None = None,
        async_safe: bool = False,
    ) -> None:
        self.name = name
        self.values = values
        if values is None:
            self._enter, self._exit = _bound_pair(self._context, name, async_safe, color)
        else:
            self._enter, self._exit = bind(
                self._context, name, async_safe=async_safe, values=values, color=color
            )
        # A stack, so one instance can be re-entered (recursion) as long as it stays on one
        # thread.
        self._handles: list[object] = []

    def __enter__(self) -> _RangeContext:
        self._handles.append(self._enter())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._exit(self._handles.pop())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class TorchRecordContext(_RangeContext):
    """A range in the PyTorch profiler trace (a ``user_annotation`` event).

    Records nothing, at almost no cost, while no profiler is running.

    Args:
        name: The range name shown in the trace.
        values: Accepted for compatibility with custom contexts; ignored.
        color: Accepted for symmetry with :class:`NvtxContext`; ignored.
        async_safe: Accepted for symmetry with :class:`NvtxContext`; torch ranges are always
            safe to interleave.
    """

    _context = "torch"


class NvtxContext(_RangeContext):
    """An NVTX range in the ``ncompass`` domain, for Nsight Systems and other NVTX tools.

    Records nothing, at almost no cost, when no NVTX tool is attached.

    Args:
        name: The range name.
        values: Accepted for compatibility with custom contexts; ignored.
        color: A colour name, ``"#RRGGBB"`` or an integer; by default derived from ``name``.
        async_safe: Use a start/end range (may interleave with other ranges on the thread,
            or end on another thread) instead of push/pop.
    """

    _context = "nvtx"

"""The base class every profiler backend derives from: what a backend does not do is a no-op.

Its own module, apart from the factory in :mod:`.base` (which imports every backend), so that
the backends import it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ncompass.capture.backends.kinds import BackendKind, kind_of

if TYPE_CHECKING:
    from ncompass.capture.compiled_kernels import CompiledKernel


class ProfilerBackend:
    """Starts and stops one capture of a run; what a backend does not do is a no-op here.

    Callers call every method on every backend instead of asking which one they hold: a
    backend overrides what it does (torch overrides all of them).

    Attributes:
        name: The ``--profiler`` value.
        marker_context: The range context whose markers this profiler records; specs that
            do not choose a context get this one.
        compiled_kernels: Once stopped, the Inductor kernels compiled while it recorded
            (torch only; empty otherwise).
    """

    name: ClassVar[str]
    marker_context: ClassVar[str]
    compiled_kernels: list[CompiledKernel] = []  # noqa: RUF012  # never mutated: replaced

    @property
    def kind(self) -> BackendKind:
        """What this backend can do (:mod:`.kinds`)."""
        return kind_of(self.name)

    def prepare(self) -> None:
        """Get ready to start, so that :meth:`start` is quick (a window measured from it)."""

    def start(self) -> None:
        """Begin recording."""
        raise NotImplementedError

    def stop(self) -> Path | None:
        """End recording and write the trace; return its path (None if nothing is written here)."""
        raise NotImplementedError

    def stop_and_discard(self) -> None:
        """End recording and write nothing (the run stopped before its program, or another
        profiler takes over)."""
        self.stop()

    def add_metadata(self, key: str, value: object) -> None:
        """Write ``key: value`` at the top level of the trace, if the trace has such a place."""

    def room_for_code_profiler(
        self, before_stepping_aside: Callable[[], object]
    ) -> AbstractContextManager[None]:
        """Room, inside the block, for the profiled code's own profiler of the same kind
        (only torch's Kineto allows just one; the others need nothing)."""
        return nullcontext()


__all__ = ["ProfilerBackend"]

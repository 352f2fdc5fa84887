"""``capture_trace``: profile one function's calls, but only when profiling is on.

A pass-through unless ``NCOMPASS_PROFILE=1`` (``ncompass run`` and profiling sessions set it)
or the process runs in a job of ``ncompass submit`` (``NCOMPASS_REMOTE=1``, the seed's
``CHISEL_BACKEND_RUN``).
When on, each call writes ``{trace_name}.json`` into the trace folder (``$NCOMPASS_TRACE_DIR``,
default ``traces``), never overwriting an earlier one. Inside another profiled region (a nested
``capture_trace``, or ``ncompass run --profiler torch``) the call is cut out of the outer trace,
recorded with the outer profiler's options: a ``record_shapes``/``profile_memory`` it lacks is
reported as a :class:`CaptureOptionWarning` (a running torch profiler cannot change them).
"""

from __future__ import annotations

import functools
import itertools
import os
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, TypeVar, overload

from ncompass import environment_variables
from ncompass.capture.backends.torch import TorchProfiler
from ncompass.capture.trace_files import claim_trace_path, release_claim, trace_dir
from ncompass.errors import NcompassWarning
from ncompass.warning_location import stacklevel_outside

PROFILE_ENV = environment_variables.NCOMPASS_PROFILE
REMOTE_ENV = environment_variables.NCOMPASS_REMOTE
_OFF = ("", "0", "false", "False")

P = ParamSpec("P")
R = TypeVar("R")

# the options a call inside a running profiler cannot have, and the `ncompass run` flag for each
_RUN_FLAGS = {"record_shapes": "--record-shapes", "profile_memory": "--profile-memory"}


class CaptureOptionWarning(NcompassWarning):
    """A ``capture_trace`` option that does nothing: a torch profiler already running (that
    of ``ncompass run``, or of an enclosing ``capture_trace``) records the call with its own."""


def profiling_enabled() -> bool:
    """Whether ``capture_trace`` records.

    On with ``NCOMPASS_PROFILE=1``, and inside a submitted job (``NCOMPASS_REMOTE=1``) unless
    ``NCOMPASS_PROFILE`` explicitly says off.
    """
    explicit = os.environ.get(PROFILE_ENV, "")
    if explicit:
        return explicit not in _OFF
    return os.environ.get(REMOTE_ENV, "") not in _OFF


class TorchProfilerContext:
    """Profile a block with the PyTorch profiler and write ``{output_dir}/{name}.json``.

    The seed SDK's ``TorchProfilerContext``; it records whether or not profiling is switched on.

    Args:
        name: Trace name (also recorded as a range around the block).
        output_dir: Trace folder (default: ``$NCOMPASS_TRACE_DIR`` or ``traces``).
        record_shapes: Record input shapes of ops.
        profile_memory: Record allocations.
    """

    def __init__(
        self,
        name: str,
        output_dir: str | os.PathLike[str] | None = None,
        *,
        record_shapes: bool = False,
        profile_memory: bool = False,
    ) -> None:
        self.name = name
        self.output_dir = trace_dir(output_dir)
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.trace_path: Path | None = None
        self._profiler: TorchProfiler | None = None
        self._range: AbstractContextManager[Any] = nullcontext()

    def __enter__(self) -> TorchProfilerContext:
        import torch

        self.trace_path = claim_trace_path(self.output_dir, self.name)
        outer = TorchProfiler.active()
        if outer is not None:
            self._warn_unmet_options(outer)
            marker = outer.add_window(self.name, self.trace_path)
        else:
            self._profiler = TorchProfiler(
                self.trace_path,
                record_shapes=self.record_shapes,
                profile_memory=self.profile_memory,
            )
            self._profiler.start()
            marker = self.name
        self._range = torch.profiler.record_function(marker)
        self._range.__enter__()
        return self

    def _warn_unmet_options(self, outer: TorchProfiler) -> None:
        """Say which options the running profiler lacks, and how to give them to it."""
        unmet = [name for name in _RUN_FLAGS if getattr(self, name) and not getattr(outer, name)]
        if not unmet:
            return
        asked = ", ".join(f"{name}=True" for name in unmet)
        flags = " ".join(_RUN_FLAGS[name] for name in unmet)
        warnings.warn(
            f"capture_trace {self.name!r}: {asked} does nothing here: a torch profiler is "
            "already recording (ncompass run's, or an enclosing capture_trace's) and its "
            f"options win; give them to it (`ncompass run {flags} ...`)",
            CaptureOptionWarning,
            stacklevel=stacklevel_outside("ncompass"),
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._range.__exit__(exc_type, exc, tb)
        if self._profiler is not None:
            profiler, self._profiler = self._profiler, None
            try:
                profiler.stop()
            except BaseException:
                if self.trace_path is not None:  # no trace: no empty file under its name
                    release_claim(self.trace_path)
                raise


@overload
def capture_trace(function: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def capture_trace(
    function: None = None,
    /,
    *,
    trace_name: str | None = None,
    record_shapes: bool = False,
    profile_memory: bool = False,
    window: tuple[int, int] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def capture_trace(
    function: Callable[P, R] | None = None,
    /,
    *,
    trace_name: str | None = None,
    record_shapes: bool = False,
    profile_memory: bool = False,
    window: tuple[int, int] | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Profile each call of the decorated function when profiling is on.

    Usable bare (``@capture_trace``) or with options
    (``@capture_trace(trace_name="matmul", record_shapes=True)``).

    Args:
        trace_name: Trace file name without ``.json`` (default: the function's name).
        record_shapes: Record tensor shapes.
        profile_memory: Record memory allocations.
        window: ``(FIRST, COUNT)``: record only calls FIRST to FIRST+COUNT-1 (counted from 1
            in this process, while profiling is on); the other calls run unprofiled.

    Raises:
        ValueError: ``window`` is not two integers of at least 1.
    """
    if window is not None and (
        len(window) != 2 or not all(isinstance(n, int) and n >= 1 for n in window)
    ):
        raise ValueError(f"capture_trace(window={window!r}): give (FIRST, COUNT), both >= 1")

    def decorate(target: Callable[P, R]) -> Callable[P, R]:
        name: str = trace_name or getattr(target, "__name__", None) or "trace"

        calls = itertools.count(1)
        first, last = (window[0], window[0] + window[1] - 1) if window else (1, 0)

        @functools.wraps(target)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            if not profiling_enabled():
                return target(*args, **kwargs)
            if window is not None and not first <= next(calls) <= last:
                return target(*args, **kwargs)
            with TorchProfilerContext(
                name, record_shapes=record_shapes, profile_memory=profile_memory
            ):
                return target(*args, **kwargs)

        return traced

    if function is not None:
        return decorate(function)
    return decorate


__all__ = [
    "PROFILE_ENV",
    "CaptureOptionWarning",
    "TorchProfilerContext",
    "capture_trace",
    "profiling_enabled",
]

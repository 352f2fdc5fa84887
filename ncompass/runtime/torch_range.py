"""The ``torch`` context: ranges shown as ``user_annotation`` events in torch profiler traces.

Why this path:
    ``torch._C._autograd._record_function_with_args_enter/_exit`` record a ``USER_SCOPE``
    RecordFunction, which the profiler exports with ``"cat": "user_annotation"`` (the same as
    ``torch.profiler.record_function``), without the dispatcher round trip of
    ``torch.ops.profiler._record_function_enter_new`` that ``record_function`` takes: a marker
    costs ~1.7 µs while recording against ~5 µs for ``record_function`` (and ~45 ns against
    ~4.5 µs when nothing records; see benchmarks/bench_markers.py).
    ``torch._C._profiler._RecordFunctionFast`` is cheaper still but exports as ``cpu_op``, so
    analysis would not see it as a marker.

When nothing records:
    Every profiler started from Python (``torch.profiler.profile``,
    ``torch.autograd.profiler.profile``, ``emit_nvtx``, ``emit_itt``) sets the module flag
    ``torch.autograd.profiler._is_profiler_enabled`` before it enables recording and clears it
    after, and torch itself reads that flag for the same purpose. Reading it costs a few
    nanoseconds against ~30 ns for ``torch._C._autograd._profiler_enabled()``; an idle marker
    does nothing else: no allocation, no name formatting. Profilers started from C++
    (Kineto on-demand tracing through dynolog, ``KINETO_USE_DAEMON=1``) do not set the flag,
    so when that variable is set the C++ state is asked instead.

Importing torch:
    Binding never imports torch. While ``torch.autograd.profiler`` is not imported nothing can
    be recording, so enter only checks ``sys.modules`` until it is; then it rebinds the module
    global it reads, and later calls pay only the flag check. If torch is not installed at all,
    the context records nothing and warns once.

Compiled code and CUDA graphs:
    ``torch.compile`` traces stand-ins that do nothing (:mod:`ncompass.runtime.compiled`); the
    recording path also records nothing while Dynamo traces or a CUDA graph is captured
    (:mod:`ncompass.runtime.cuda_graphs`). Idle markers pay for neither check.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import warnings
from collections.abc import Callable
from sys import _getframe as _caller  # the frame that opened the range
from typing import Any

from ncompass import environment_variables
from ncompass.runtime.base import BoundRange, MarkerSite, RangeContextWarning
from ncompass.runtime.cuda_graphs import skipped_in_capture
from ncompass.runtime.names import trace_safe_name
from ncompass.runtime.noop import idle_range


class _TorchNotImportedYet:
    """Stands in for ``torch.autograd.profiler`` until torch has been imported."""

    @property
    def _is_profiler_enabled(self) -> bool:
        return _resolve_torch()


class _CppProfilerState:
    """Asks the C++ profiler state, for profilers that do not set the Python flag."""

    def __init__(self, profiler_enabled: Any) -> None:
        self._profiler_enabled = profiler_enabled

    @property
    def _is_profiler_enabled(self) -> bool:
        return bool(self._profiler_enabled())


# The object whose `_is_profiler_enabled` every torch marker reads; rebound once torch is seen.
_profiler_state: Any = _TorchNotImportedYet()
_record_enter: Any = None
_record_exit: Any = None


def _resolve_torch() -> bool:
    """Binds the torch functions once ``torch.autograd.profiler`` is imported.

    Returns:
        Whether a profiler is recording now (False while torch is not imported).
    """
    global _profiler_state, _record_enter, _record_exit, _is_compiling
    autograd_profiler = sys.modules.get("torch.autograd.profiler")
    torch = sys.modules.get("torch")
    if autograd_profiler is None or torch is None:
        return False
    try:
        autograd = torch._C._autograd
        record_enter = autograd._record_function_with_args_enter
        record_exit = autograd._record_function_with_args_exit
        state: Any = autograd_profiler
        if os.environ.get(environment_variables.KINETO_USE_DAEMON):
            state = _CppProfilerState(autograd._profiler_enabled)
        enabled = bool(state._is_profiler_enabled)
        is_compiling = torch.compiler.is_compiling
    except AttributeError:  # torch is still half-way through its own import
        return False
    _is_compiling = is_compiling
    # The record functions must be in place before any thread can see the new state.
    _record_enter, _record_exit = record_enter, record_exit
    _profiler_state = state
    return enabled


_torch_installed: bool | None = None


def _torch_is_installed() -> bool:
    """Whether torch can be imported, answered once per process without importing it."""
    global _torch_installed
    if _torch_installed is None:
        _torch_installed = "torch" in sys.modules or importlib.util.find_spec("torch") is not None
        if not _torch_installed:
            warnings.warn(
                "torch is not installed: markers with the 'torch' context record nothing "
                "(install torch, or use the 'nvtx' or 'noop' context)",
                RangeContextWarning,
                stacklevel=4,
            )
    return _torch_installed


# Exit is the builtin `next`, and a handle is an iterator whose first step ends its range: the
# handle of a range that records nothing is one shared `itertools.repeat(None)`, whose step does
# nothing. An idle exit thus runs no Python frame, allocates nothing and runs no user code
# (~6-10 ns cheaper than a Python exit), and torch.compile can trace it, unlike the
# `operator.call` this used before.
_IDLE_HANDLE = itertools.repeat(None)
_exit: Callable[[Any], object] = next


_is_compiling: Callable[[], bool] = bool  # torch.compiler.is_compiling, once torch is imported


def _records_now(name: str) -> bool:
    """Whether a range may be recorded now that a profiler is on (the recording path only).

    Not while Dynamo traces (a fallback: it traces the stand-ins of
    :mod:`ncompass.runtime.compiled` instead), nor while a CUDA graph is being captured.
    """
    return not _is_compiling() and not skipped_in_capture(name)


def _recording_handle(name: str) -> object:
    # names are cleaned only here, when recording: torch writes them into JSON unescaped
    return map(_record_exit, (_record_enter(trace_safe_name(name)),))


def _enter_named(name: str) -> object:
    """Starts a torch range named ``name`` if a profiler records; returns its handle."""
    if _profiler_state._is_profiler_enabled and _records_now(name):
        return _recording_handle(name)
    return _IDLE_HANDLE


class TorchBackend:
    """The ``torch`` context (see the module docstring for why it is built this way)."""

    def bind(self, site: MarkerSite, *, async_safe: bool) -> BoundRange:
        """Binds ``site`` (see :class:`ncompass.runtime.base.RangeBackend`).

        RecordFunction handles are independent objects rather than entries of a stack, so the
        same pair serves async-safe sites, and exit may run on another thread. Handles are
        iterators whose first step ends their range (see ``_exit``).
        """
        if not _torch_is_installed():
            return idle_range(site)
        name = site.name
        if site.dynamic:
            resolve_name = site.resolve_name

            def enter_dynamic(name_fn: Any) -> object:
                if _profiler_state._is_profiler_enabled and _records_now(name):
                    return _recording_handle(resolve_name(name_fn, _caller(1)))
                return _IDLE_HANDLE

            return BoundRange(enter=enter_dynamic, exit=_exit, enter_named=_enter_named)

        def enter() -> object:
            if _profiler_state._is_profiler_enabled and _records_now(name):
                return _recording_handle(name)
            return _IDLE_HANDLE

        return BoundRange(enter=enter, exit=_exit, enter_named=_enter_named)

"""What ``torch.compile`` sees of a marker: nothing.

Dynamo compiles a function by tracing its bytecode. Traced as they are, a marker's enter and
exit would reach the profiler's C functions (Dynamo stops: ``Unsupported``, or a graph break
without ``fullgraph``) and read the profiler's on/off flag (Dynamo guards on it: starting the
profiler later would recompile the graph). So every enter, exit and call helper a marker binds
carries ``_torchdynamo_inline``: the attribute Dynamo follows for wrapped functions (its own
``torch.compile`` wrappers, ``torch.jit.script``), tracing the function it names instead of the
function called. Those stand-ins do nothing, so nothing of the marker reaches the graph, no
guard is installed and the graph is the one compiled without the spec.

Eager calls never look at the attribute: an idle marker costs what it cost before. The
recording paths also ask ``torch.compiler.is_compiling()`` (a fallback, should a torch release
stop following the attribute); see ``docs/compile.md``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import FunctionType
from typing import Any, TypeVar

TRACED_INSTEAD = "_torchdynamo_inline"
"""The function attribute naming what Dynamo traces in place of the function."""

_Callable = TypeVar("_Callable", bound=Callable[..., Any])


def _enter_while_compiling(*args: object) -> object:
    """Traced in place of a marker's enter: no range; a handle every exit takes.

    The ``torch`` exit is the builtin ``next`` (see :mod:`ncompass.runtime.torch_range`), which
    Dynamo traces on an iterator made in the traced code; the other exits are stand-ins.
    """
    return itertools.repeat(None)


def _exit_while_compiling(handle: object) -> None:
    """Traced in place of a marker's exit."""
    return None


def _call_while_compiling(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Traced in place of a call marker's helper: the call alone."""
    return fn(*args, **kwargs)


def _hidden(function: _Callable, stand_in: Callable[..., Any]) -> _Callable:
    # Builtins (the idle range's `bool` and `type`, the torch exit `next`) take no attributes
    # and need none: Dynamo traces them. Everything else a backend binds is a Python function.
    if isinstance(function, FunctionType):
        setattr(function, TRACED_INSTEAD, stand_in)
    return function


def hidden_enter(enter: _Callable) -> _Callable:
    """``enter``, which ``torch.compile`` traces as doing nothing."""
    return _hidden(enter, _enter_while_compiling)


def hidden_exit(exit: _Callable) -> _Callable:
    """``exit``, which ``torch.compile`` traces as doing nothing."""
    return _hidden(exit, _exit_while_compiling)


def hidden_call_helper(helper: _Callable) -> _Callable:
    """A call marker's helper, which ``torch.compile`` traces as the bare call."""
    return _hidden(helper, _call_while_compiling)


__all__ = ["TRACED_INSTEAD", "hidden_call_helper", "hidden_enter", "hidden_exit"]

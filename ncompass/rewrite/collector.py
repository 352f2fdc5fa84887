"""The cyclic garbage collector, paused while a module is parsed, rewritten and compiled.

A rewrite of a large module allocates some 10^5 short-lived libcst nodes, freed by reference
counting as soon as they are replaced. The collector's passes over them find nothing to free
and cost about a fifth of the rewrite (typing.py: 0.62 s with them, 0.51 s without).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_Params = ParamSpec("_Params")
_Result = TypeVar("_Result")


def collector_paused(function: Callable[_Params, _Result]) -> Callable[_Params, _Result]:
    """Run ``function`` with the cyclic collector off (when it was on), then turn it back on."""

    @functools.wraps(function)
    def paused(*args: _Params.args, **kwargs: _Params.kwargs) -> _Result:
        if not gc.isenabled():
            return function(*args, **kwargs)
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.enable()

    return paused


__all__ = ["collector_paused"]

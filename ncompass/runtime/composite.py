"""Several contexts under one marker (``torch+nvtx``): one range per part, properly nested."""

from __future__ import annotations

from collections.abc import Sequence
from sys import _getframe as _caller  # the frame that opened the range
from typing import Any

from ncompass.runtime.base import BoundRange, MarkerSite, RangeBackend
from ncompass.runtime.noop import idle_range


class CompositeBackend:
    """Opens the ranges of its parts in order and closes them in reverse order.

    Parts that can never record in this process (an NVTX context with no tool attached) are
    dropped at bind time, so ``torch+nvtx`` without Nsight costs what ``torch`` costs.

    Args:
        parts: The backends, outermost first.
    """

    def __init__(self, parts: Sequence[RangeBackend]) -> None:
        self._parts = tuple(parts)

    def bind(self, site: MarkerSite, *, async_safe: bool) -> BoundRange:
        """Binds ``site`` in every part (see :class:`ncompass.runtime.base.RangeBackend`)."""
        bound = [part.bind(site, async_safe=async_safe) for part in self._parts]
        live = [part for part in bound if not part.idle]
        if not live:
            return idle_range(site)
        if len(live) == 1:
            return live[0]
        return _nest(live, site)


def _nest(parts: list[BoundRange], site: MarkerSite) -> BoundRange:
    """Combines live ranges; the handle is the tuple of the parts' handles."""
    enters = tuple(part.enter for part in parts)
    named_enters = tuple(part.enter_named for part in parts)
    exits = tuple(part.exit for part in reversed(parts))

    def exit_range(handles: Any) -> None:
        for exit_part, handle in zip(exits, reversed(handles), strict=True):
            exit_part(handle)

    def enter_named(name: str) -> object:
        return tuple([enter(name) for enter in named_enters])

    if site.dynamic:
        resolve_name = site.resolve_name

        def enter_dynamic(name_fn: Any) -> object:
            name = resolve_name(name_fn, _caller(1))  # computed once, shared by every part
            return tuple([enter(name) for enter in named_enters])

        return BoundRange(enter=enter_dynamic, exit=exit_range, enter_named=enter_named)

    def enter() -> object:
        return tuple([enter_part() for enter_part in enters])

    return BoundRange(enter=enter, exit=exit_range, enter_named=enter_named)

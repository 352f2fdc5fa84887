"""What every range backend produces, and the marker site it produces it for.

A backend (torch, nvtx, noop, custom) turns a :class:`MarkerSite` into a :class:`BoundRange`:
an ``enter`` callable returning an opaque handle and an ``exit`` callable taking that handle.
Rewritten modules call them around the wrapped code::

    __nc_h3 = __nc_enter_3()          # or __nc_enter_3(__nc_name_3), a NameTemplate
    try:
        ...
    finally:
        __nc_exit_3(__nc_h3)

Both run on every execution of the wrapped code, so backends decide everything they can at
bind time and keep the per-call path to a flag check when nothing records.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from types import FrameType
from typing import NamedTuple, Protocol

from ncompass.errors import NcompassWarning
from ncompass.runtime.templates import NameTemplate

EnterRange = Callable[..., object]
"""``enter()`` for a fixed name, ``enter(name_fn)`` for a dynamic one; returns the handle."""

ExitRange = Callable[[object], object]
"""``exit(handle)``: ends the range ``enter`` started; its return value is ignored."""

EnterNamedRange = Callable[[str], object]
"""Starts the range under a name the caller has already computed (used by composites)."""


class RangeContextWarning(NcompassWarning):
    """A marker could not do all it was asked (a name template failed, a context is missing).

    The wrapped code always runs unchanged; the warning says what the trace will lack.
    """


class BoundRange(NamedTuple):
    """The enter/exit pair a backend bound for one marker site.

    Attributes:
        enter: Starts the range and returns its handle; takes ``name_fn`` when the site is
            dynamic.
        exit: Ends the range of a handle ``enter`` returned.
        enter_named: Starts the range under an already computed name (composites compute a
            dynamic name once for all their parts).
        idle: True when the range can never record in this process (no NVTX tool attached,
            torch not installed), so composites can drop it at bind time.
    """

    enter: EnterRange
    exit: ExitRange
    enter_named: EnterNamedRange
    idle: bool = False


class MarkerSite:
    """One marker in the rewritten code: its name and what to do when a name cannot be built.

    (A plain class rather than a dataclass: this module is imported by every rewritten module,
    and ``dataclasses`` would pull in ``inspect``.)

    Args:
        name: The marker name; for dynamic sites, the name template as written in the spec,
            used when the name function fails.
        dynamic: True when ``enter`` receives a zero-argument function computing the name.
        values: Keyword values handed to custom context classes.
        color: NVTX colour as written (name, ``#RRGGBB`` or int) or None for the default of
            ``name``; :attr:`color` gives it as ARGB, computed on first use (only NVTX needs it,
            and every site of a module is bound when the module is imported).
    """

    __slots__ = ("_color", "_color_spec", "_warned", "dynamic", "name", "values")

    def __init__(
        self,
        name: str,
        *,
        dynamic: bool = False,
        values: Mapping[str, object] | None = None,
        color: str | int | None = None,
    ) -> None:
        self.name = name
        self.dynamic = dynamic
        self.values = values
        self._color_spec = color
        self._color: int | None = None
        self._warned: set[str] | None = None

    @property
    def color(self) -> int:
        """The NVTX colour as ``0xAARRGGBB``."""
        if self._color is None:
            from ncompass.runtime.colors import parse_color

            self._color = parse_color(self._color_spec, name=self.name)
        return self._color

    def __repr__(self) -> str:
        return f"MarkerSite({self.name!r}, dynamic={self.dynamic})"

    def resolve_name(self, name_fn: Callable[..., object], frame: FrameType | None = None) -> str:
        """Returns the name ``name_fn`` computes, or the template when it fails (warned once).

        Args:
            name_fn: What the rewritten code passed to ``enter``: a
                :class:`~ncompass.runtime.templates.NameTemplate` (evaluated in ``frame``, the
                frame that opened the range) or a zero-argument function.
            frame: The frame that called ``enter``.

        Returns:
            The computed name as a string.
        """
        try:
            if not isinstance(name_fn, NameTemplate):
                computed = name_fn()
            elif frame is not None:
                computed = name_fn(frame)
            else:
                return self.name
            return computed if type(computed) is str else str(computed)
        except Exception as error:  # a marker must never break the code it measures
            self.warn_once(
                "name",
                f"marker name {self.name!r} could not be computed "
                f"({type(error).__name__}: {error}); using the template text instead",
                stacklevel=4,
            )
            return self.name

    def warn_once(self, topic: str, message: str, *, stacklevel: int = 3) -> None:
        """Emits a :class:`RangeContextWarning` the first time ``topic`` comes up at this site."""
        if self._warned is None:
            self._warned = set()
        if topic in self._warned:
            return
        self._warned.add(topic)
        warnings.warn(message, RangeContextWarning, stacklevel=stacklevel)


class RangeBackend(Protocol):
    """A kind of range (torch, nvtx, ...) that can bind marker sites."""

    def bind(self, site: MarkerSite, *, async_safe: bool) -> BoundRange:
        """Binds one marker site.

        Args:
            site: The marker to bind.
            async_safe: True when ranges of this site may interleave on one thread (async
                code) or end on another thread, so a push/pop stack must not be used.

        Returns:
            The site's enter/exit pair.
        """
        ...

"""The range that records nothing: for the ``noop`` context and for backends that cannot record.

Its enter and exit are C builtins rather than Python functions: calling one costs no Python
frame, allocates nothing and never runs user code (``type(x)`` only reads ``x``'s class, unlike
``bool(x)`` which may call ``x.__bool__``).
"""

from __future__ import annotations

from ncompass.runtime.base import BoundRange, MarkerSite

# bool() returns the shared False object: the handle of a range that records nothing.
_enter_fixed_name = bool
# type(name_fn) discards the name function without calling it; type(handle) discards the handle.
_enter_dynamic_name = type
_discard = type


_IDLE_FIXED = BoundRange(enter=_enter_fixed_name, exit=_discard, enter_named=_discard, idle=True)
_IDLE_DYNAMIC = BoundRange(
    enter=_enter_dynamic_name, exit=_discard, enter_named=_discard, idle=True
)


def idle_range(site: MarkerSite) -> BoundRange:
    """Returns the enter/exit pair that records nothing for ``site`` (shared by all such sites).

    Args:
        site: The marker site; only whether its name is dynamic matters.

    Returns:
        A :class:`BoundRange` marked idle.
    """
    return _IDLE_DYNAMIC if site.dynamic else _IDLE_FIXED


class NoopBackend:
    """The ``noop`` context: markers stay in the code but never record."""

    def bind(self, site: MarkerSite, *, async_safe: bool) -> BoundRange:
        """Binds ``site`` to the idle range (see :class:`ncompass.runtime.base.RangeBackend`)."""
        return idle_range(site)

"""Custom contexts: any class taking the marker name (and keyword ``values``) with enter/exit.

A spec names one as ``"package.module:ClassName"``. Every time the marked code runs, ncompass
creates an instance, calls its ``__enter__``, runs the code, and calls its ``__exit__`` with the
exception leaving the code (or three Nones). Like the built-in contexts it never changes what
the marked code does: an exception raised by the class itself is reported as a warning (once
per marker) instead of replacing or hiding the code's own outcome, and what ``__exit__``
returns is ignored (a marker cannot swallow an exception).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from sys import _getframe as _caller  # the frame that opened the range
from types import MappingProxyType
from typing import Any

from ncompass.errors import ContextError
from ncompass.runtime.base import BoundRange, MarkerSite

_REQUIREMENT = (
    "a custom context must be a class taking the marker name (and optionally the keyword "
    "'values') whose instances have __enter__ and __exit__"
)


def load_context_class(spec: str, module_name: str, attribute: str) -> type:
    """Imports and checks the class a custom context names.

    Args:
        spec: The context as written in the spec (for messages).
        module_name: The module part, e.g. ``"mypkg.contexts"``.
        attribute: The class part, e.g. ``"Timer"`` (may be dotted for nested classes).

    Returns:
        The class.

    Raises:
        ContextError: The module cannot be imported, has no such attribute, the attribute is
            not a class, or the class lacks ``__enter__``/``__exit__``.
    """
    import importlib  # only here: runtime.sites must import quickly

    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:
        raise ContextError(
            f"context {spec!r}: cannot import module {module_name!r} "
            f"({type(error).__name__}: {error}); check the module name and that it is "
            "installed or on sys.path"
        ) from error
    owner_name = module_name
    for part in attribute.split("."):
        if not hasattr(target, part):
            import difflib

            close = difflib.get_close_matches(part, [n for n in dir(target) if n[:1] != "_"])
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ContextError(f"context {spec!r}: {owner_name!r} has no attribute {part!r}{hint}")
        target = getattr(target, part)
        owner_name = f"{owner_name}.{part}"
    if not isinstance(target, type):
        raise ContextError(
            f"context {spec!r} is a {type(target).__name__}, not a class; {_REQUIREMENT}"
        )
    missing = [method for method in ("__enter__", "__exit__") if not hasattr(target, method)]
    if missing:
        raise ContextError(
            f"context {spec!r}: class {target.__qualname__} has no "
            f"{' or '.join(missing)} method; {_REQUIREMENT}"
        )
    return target


def accepts_values(context_class: type) -> bool:
    """Whether ``context_class(name, values=...)`` is a valid call."""
    import inspect

    try:
        parameters = inspect.signature(context_class).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: assume the documented shape
        return True
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (p.name == "values" and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in parameters
    )


class CustomBackend:
    """Binds marker sites to instances of one custom context class.

    Args:
        context_class: The class, as returned by :func:`load_context_class`.
        spec: The context as written in the spec (for messages).
    """

    def __init__(self, context_class: type, spec: str) -> None:
        self._class = context_class
        self._spec = spec
        self._accepts_values = accepts_values(context_class)

    def bind(self, site: MarkerSite, *, async_safe: bool) -> BoundRange:
        """Binds ``site`` (see :class:`ncompass.runtime.base.RangeBackend`).

        The handle is opaque: the instance and the exception being handled when the range began
        (so ``__exit__`` is not told about an exception an enclosing ``except`` block handles).

        Raises:
            ContextError: ``values`` were given but the class does not accept them.
        """
        context_class = self._class
        kwargs: dict[str, object] = {}
        if site.values is not None:
            if not self._accepts_values:
                raise ContextError(
                    f"context {self._spec!r}: the marker {site.name!r} gives values, but "
                    f"{context_class.__qualname__} takes no 'values' keyword; add a "
                    "'values=None' parameter or remove the values from the spec"
                )
            kwargs["values"] = _frozen(site.values)

        def enter_named(name: str) -> object:
            handled = sys.exc_info()[1]
            try:
                instance = context_class(name, **kwargs)
                instance.__enter__()
            except Exception as error:
                site.warn_once("enter", _failure(self._spec, "__enter__", error), stacklevel=4)
                return None
            return (instance, handled)

        def exit_range(handle: Any) -> None:
            if handle is None:
                return
            instance, handled = handle
            exc_type, exc, traceback = sys.exc_info()
            if exc is handled:  # not raised by the marked code: an enclosing handler's
                exc_type = exc = traceback = None
            try:
                instance.__exit__(exc_type, exc, traceback)
            except Exception as error:
                site.warn_once("exit", _failure(self._spec, "__exit__", error), stacklevel=3)

        if site.dynamic:
            resolve_name = site.resolve_name

            def enter_dynamic(name_fn: Any) -> object:
                return enter_named(resolve_name(name_fn, _caller(1)))

            return BoundRange(enter=enter_dynamic, exit=exit_range, enter_named=enter_named)
        name = site.name

        def enter() -> object:
            return enter_named(name)

        return BoundRange(enter=enter, exit=exit_range, enter_named=enter_named)


def _frozen(values: Mapping[str, object]) -> Mapping[str, object]:
    """A read-only copy, so one call cannot change the values the next call sees."""
    return MappingProxyType(dict(values))


def _failure(spec: str, method: str, error: Exception) -> str:
    return (
        f"custom context {spec!r} raised in {method} ({type(error).__name__}: {error}); "
        "the marked code ran unchanged but this range is missing from the trace"
    )

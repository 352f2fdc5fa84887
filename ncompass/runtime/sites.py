"""The entry point rewritten modules call: one :func:`bind` per marker site, at import time.

A rewritten module imports this module as ``__ncompass_runtime__`` and, once per marker::

    __nc_enter_3, __nc_exit_3 = __ncompass_runtime__.bind(
        "torch", "mypkg.attn:Attention.forward", dynamic=False, async_safe=False)

then wraps the marked code in ``h = __nc_enter_3()`` / ``try`` / ``finally: __nc_exit_3(h)``.
Importing this module is cheap: it never imports torch, nvtx, libcst, pydantic or rich.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from sys import _getframe as _caller  # the frame that made the call
from types import FrameType
from typing import Any, TypeVar

from ncompass.runtime.base import MarkerSite
from ncompass.runtime.colors import parse_color
from ncompass.runtime.compiled import hidden_call_helper, hidden_enter, hidden_exit
from ncompass.runtime.contexts import ResolvedContext, backend_for, resolve_context
from ncompass.runtime.templates import NameTemplate, template

_Result = TypeVar("_Result")


def bind(
    context: str,
    name: str,
    *,
    dynamic: bool = False,
    async_safe: bool = False,
    values: Mapping[str, object] | None = None,
    color: str | int | None = None,
) -> tuple[Callable[..., object], Callable[[object], object]]:
    """Binds one marker site and returns its ``(enter, exit)`` pair.

    ``enter()`` starts the range and returns a handle; ``exit(handle)`` ends that range. Call
    exit exactly once per enter, in a ``finally`` block; handles are opaque. When nothing
    records (no profiler running, no NVTX tool attached), enter and exit do nothing and
    allocate nothing.

    Args:
        context: ``"torch"``, ``"nvtx"``, ``"torch+nvtx"``, ``"noop"``, a custom class as
            ``"package.module:ClassName"``, or a seed context class path (see
            :func:`ncompass.runtime.contexts.resolve_context`).
        name: The marker name. With ``dynamic=True``, the name template as written in the
            spec: it becomes the name when the name function raises.
        dynamic: When True, ``enter`` takes a zero-argument function returning the name. It is
            only called when something records; if it raises, ``name`` is used and a
            :class:`~ncompass.runtime.base.RangeContextWarning` is issued once for this site.
        async_safe: When True, ranges may interleave on one thread (async code, generators)
            or end on another thread: NVTX uses start/end ranges instead of push/pop.
        values: Keyword values passed to a custom context class as ``values=``; the built-in
            contexts ignore them.
        color: NVTX colour (a name, ``"#RRGGBB"`` or an integer); by default a stable colour
            derived from ``name``.

    Returns:
        ``(enter, exit)``.

    Raises:
        ContextError: The context cannot be used, the colour is not understood, or values are
            given to a class that does not accept them.
    """
    resolved = resolve_context(context)
    if color is not None:
        parse_color(color, name=name)  # a wrong colour is an error whatever the context
    site = MarkerSite(name=name, dynamic=dynamic, values=values, color=color)
    bound = backend_for(resolved).bind(site, async_safe=async_safe)
    enter, exit = bound.enter, bound.exit
    if _site_hooks:
        hook = _site_hooks.get(name)
        if hook is not None:
            enter, exit = hook(enter, exit)
    return hidden_enter(enter), hidden_exit(exit)


SiteHook = Callable[
    [Callable[..., object], Callable[[object], object]],
    tuple[Callable[..., object], Callable[[object], object]],
]
"""Takes a site's ``(enter, exit)`` pair and returns the pair the rewritten code calls."""

_site_hooks: dict[str, SiteHook] = {}


def hook_sites(name: str, hook: SiteHook | None) -> None:
    """Wraps the ``(enter, exit)`` pair of every site named ``name`` bound from now on.

    A neutral hook for what must see each call of one marker (the recording windows of
    ``ncompass run --window`` count them); the runtime knows nothing of its user. Sites of
    other names keep the pair their backend bound, so they pay nothing. ``None`` removes it.
    """
    if hook is None:
        _site_hooks.pop(name, None)
    else:
        _site_hooks[name] = hook


class _NameInFrame:
    """A template bound to the frame of the code that made a wrapped call (evaluated there)."""

    __slots__ = ("frame", "template")

    def __init__(self, template: NameTemplate, frame: FrameType) -> None:
        self.template = template
        self.frame = frame

    def __call__(self) -> object:
        return self.template(self.frame)


def call_wrapper(
    enter: Callable[..., object],
    exit: Callable[[object], object],
    name_template: NameTemplate | None = None,
    arity: int | None = None,
) -> Callable[..., Any]:
    """The helper a call marker uses for a call in a compound statement's header.

    ``if self.gate(x):`` becomes ``if _ncompass_call_3_1(self.gate, x):``: the callee and the
    arguments are evaluated where they were, then the range covers the call alone. With a
    ``name_template`` (a templated marker name), the name is evaluated in the caller's frame.
    With ``arity`` (the call passes exactly that many positional arguments and nothing else)
    the helper takes them as plain parameters: packing ``*args, **kwargs`` costs several times
    what the marker itself costs.
    """
    fixed = arity if arity is not None and arity <= _MAX_FIXED_ARITY else None
    make = _call_helper_maker(fixed, named=name_template is not None)
    return hidden_call_helper(make(enter, exit, name_template, _NameInFrame, _caller))


_MAX_FIXED_ARITY = 8
_call_helper_makers: dict[tuple[int | None, bool], Callable[..., Callable[..., Any]]] = {}


def _call_helper_maker(arity: int | None, named: bool) -> Callable[..., Callable[..., Any]]:
    """A function that builds call helpers taking exactly ``arity`` positional arguments after
    the callee, or any arguments when ``arity`` is None (generated once per shape, like
    :mod:`dataclasses` generates ``__init__``)."""
    key = (arity, named)
    maker = _call_helper_makers.get(key)
    if maker is None:
        if arity is None:
            parameters, arguments = ", /, *args, **kwargs", "*args, **kwargs"
        else:
            parameters = "".join(f", a{i}" for i in range(arity)) + ", /"
            arguments = ", ".join(f"a{i}" for i in range(arity))
        opened = "enter(name_in_frame(template, caller(1)))" if named else "enter()"
        source = (
            "def make(enter, exit, template, name_in_frame, caller):\n"
            f"    def call(fn{parameters}):\n"
            f"        handle = {opened}\n"
            "        try:\n"
            f"            return fn({arguments})\n"
            "        finally:\n"
            "            exit(handle)\n"
            "    return call\n"
        )
        namespace: dict[str, Any] = {}
        exec(compile(source, f"<ncompass call helper/{arity}>", "exec"), namespace)
        maker = _call_helper_makers.setdefault(key, namespace["make"])
    return maker


def async_call_wrapper(
    enter: Callable[..., object],
    exit: Callable[[object], object],
    name_template: NameTemplate | None = None,
) -> Callable[..., Any]:
    """Like :func:`call_wrapper` for an awaited call (``if await self.ready():``): the range
    lasts until the awaited result is there."""

    async def call(fn: Callable[..., Awaitable[_Result]], /, *args: Any, **kwargs: Any) -> _Result:
        name = None if name_template is None else _NameInFrame(name_template, _caller(1))
        handle = enter() if name is None else enter(name)
        try:
            return await fn(*args, **kwargs)
        finally:
            exit(handle)

    return call


__all__ = [
    "ResolvedContext",
    "SiteHook",
    "async_call_wrapper",
    "bind",
    "call_wrapper",
    "hook_sites",
    "resolve_context",
    "template",
]

"""Context names as written in specs → the backends that implement them.

Spec validation calls :func:`resolve_context` before anything runs, so a misspelt or broken
context is reported with the spec, not when the rewritten module is first imported.
"""

from __future__ import annotations

from typing import NamedTuple

from ncompass.errors import ContextError
from ncompass.runtime.base import RangeBackend
from ncompass.runtime.composite import CompositeBackend
from ncompass.runtime.custom import CustomBackend, accepts_values, load_context_class
from ncompass.runtime.noop import NoopBackend
from ncompass.runtime.nvtx_range import NvtxBackend
from ncompass.runtime.torch_range import TorchBackend

BUILTIN_CONTEXTS: tuple[str, ...] = ("torch", "nvtx", "torch+nvtx", "noop")
"""The built-in context names, in the order error messages list them."""

# The seed API names its context classes by dotted path; they map to the fast built-ins.
_SEED_CLASS_PATHS = {
    "ncompass.trace.profile.torch.TorchRecordContext": "torch",
    "ncompass.trace.profile.nvtx.NvtxContext": "nvtx",
}
_PROFILER_CLASS_PATHS = {
    "ncompass.trace.profile.torch.TorchProfilerContext",
    "ncompass.capture.TorchProfilerContext",
}


class ResolvedContext(NamedTuple):
    """What a context name refers to.

    Attributes:
        spec: The context as written, e.g. ``"torch+nvtx"`` or ``"mypkg.ctx:Timer"``.
        backends: The built-in backends it uses, outermost first (``("torch", "nvtx")``);
            empty for a custom class.
        context_class: The custom class, or None for built-ins.
        accepts_values: Whether markers may pass ``values`` (always True for built-ins, which
            ignore them).
    """

    spec: str
    backends: tuple[str, ...]
    context_class: type | None = None
    accepts_values: bool = True

    @property
    def is_custom(self) -> bool:
        """True for a user-supplied context class."""
        return self.context_class is not None


_resolved: dict[str, ResolvedContext] = {}
_backends: dict[str, RangeBackend] = {}


def resolve_context(context: str) -> ResolvedContext:
    """Checks a context name and says what it refers to.

    Accepted forms: the built-ins ``torch``, ``nvtx``, ``torch+nvtx`` (any ``+`` combination of
    built-ins), ``noop``; the seed's ``ncompass.trace.profile.torch.TorchRecordContext`` and
    ``ncompass.trace.profile.nvtx.NvtxContext`` (mapped to ``torch`` and ``nvtx``); and custom
    classes as ``package.module:ClassName`` (or the seed's dotted ``package.module.ClassName``).

    Args:
        context: The context as written in a spec.

    Returns:
        A :class:`ResolvedContext`; a custom class is imported and checked.

    Raises:
        ContextError: The name is unknown, or the class cannot be imported, is not a class, or
            lacks ``__enter__``/``__exit__``. The message says which and what to do.
    """
    cached = _resolved.get(context)
    if cached is not None:
        return cached
    resolved = _resolve_uncached(context)
    _resolved[context] = resolved
    return resolved


def backend_for(resolved: ResolvedContext) -> RangeBackend:
    """Returns the (shared) backend that binds sites of a resolved context."""
    backend = _backends.get(resolved.spec)
    if backend is None:
        # Two threads may both build one; backends hold no state, so either may win.
        backend = _backends.setdefault(resolved.spec, _build_backend(resolved))
    return backend


def _resolve_uncached(context: str) -> ResolvedContext:
    if not isinstance(context, str) or not context.strip():
        raise ContextError(f"context {context!r} is empty; {_choices()}")
    text = context.strip()
    colon_form = text.replace(":", ".")
    if colon_form in _SEED_CLASS_PATHS:
        return ResolvedContext(spec=context, backends=(_SEED_CLASS_PATHS[colon_form],))
    if colon_form in _PROFILER_CLASS_PATHS:
        raise ContextError(
            f"context {context!r} starts a whole profiler run and cannot mark a range; use "
            "'torch' (TorchRecordContext) for markers and choose the profiler with "
            "`ncompass run --profiler`"
        )
    if ":" in text or "." in text:
        return _resolve_class(context, text)
    parts = tuple(part.strip() for part in text.split("+"))
    unknown = [part for part in parts if part not in ("torch", "nvtx", "noop")]
    if unknown:
        import difflib

        close = difflib.get_close_matches(text, BUILTIN_CONTEXTS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ContextError(f"unknown context {context!r}: {hint}{_choices()}")
    if len(set(parts)) != len(parts) or ("noop" in parts and len(parts) > 1):
        raise ContextError(
            f"context {context!r} repeats a part or combines 'noop' with another; {_choices()}"
        )
    return ResolvedContext(spec=context, backends=parts)


def _resolve_class(context: str, text: str) -> ResolvedContext:
    if ":" in text:
        module_name, _, attribute = text.partition(":")
    else:
        module_name, _, attribute = text.rpartition(".")
    if not module_name or not attribute:
        raise ContextError(f"context {context!r} is not 'package.module:ClassName'; {_choices()}")
    context_class = load_context_class(context, module_name, attribute)
    return ResolvedContext(
        spec=context,
        backends=(),
        context_class=context_class,
        accepts_values=accepts_values(context_class),
    )


def _build_backend(resolved: ResolvedContext) -> RangeBackend:
    if resolved.context_class is not None:
        return CustomBackend(resolved.context_class, resolved.spec)
    parts = [_BUILTIN_BACKENDS[name]() for name in resolved.backends]
    return parts[0] if len(parts) == 1 else CompositeBackend(parts)


_BUILTIN_BACKENDS: dict[str, type[TorchBackend] | type[NvtxBackend] | type[NoopBackend]] = {
    "torch": TorchBackend,
    "nvtx": NvtxBackend,
    "noop": NoopBackend,
}


def _choices() -> str:
    names = ", ".join(BUILTIN_CONTEXTS)
    return f"use one of {names}, or a custom class as 'package.module:ClassName'"

"""Check the range contexts a spec names, reporting a bad one at its spec file and line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ncompass.errors import ContextError, SpecError
from ncompass.spec.models import CallMarker, FunctionMarker, RangeMarker, RewriteConfig


def check_contexts(config: RewriteConfig, *, read_classes: bool) -> list[str]:
    """Resolve every context of ``config`` (the default and each marker's own).

    Custom context classes (``pkg.mod:Timer``) are never imported here: importing runs the
    module's code. They are checked when their first marker is bound, and, with
    ``read_classes``, also now from their module's source (see
    :func:`~ncompass.importer.context_source.check_context_source`).

    Args:
        config: The spec.
        read_classes: Also check custom context classes by reading their source. Off when
            rewrites are enabled: such a class may live in code that is not on the path yet
            (the script run as ``__main__``).

    Returns:
        Notes on the custom contexts that could not be checked without importing them.

    Raises:
        SpecError: a context is unknown or unusable; the message names the spec file and the
            line of the ``context:`` that names it and what to do.
    """
    from ncompass.importer.context_source import check_context_source
    from ncompass.runtime.sites import resolve_context

    notes: list[str] = []
    for context, path, line in _contexts(config):
        try:
            custom = _custom_class(context)
            if custom is None:
                resolve_context(context)
            elif read_classes:
                note = check_context_source(context, *custom)
                if note is not None and note not in notes:
                    notes.append(note)
        except ContextError as error:
            raise SpecError(str(error), path, line) from None
    return notes


def _custom_class(context: str) -> tuple[str, str] | None:
    """``(module, class)`` of a user's context class; None for the built-ins and ncompass's own
    classes (which :func:`resolve_context` maps without running anyone's code)."""
    text = context.strip() if isinstance(context, str) else ""
    if (":" not in text and "." not in text) or text.startswith("ncompass."):
        return None
    if ":" in text:
        module_name, _, attribute = text.partition(":")
    else:
        module_name, _, attribute = text.rpartition(".")
    if not module_name or not attribute:
        return None  # malformed: resolve_context says how to write it
    return module_name, attribute


def _contexts(config: RewriteConfig) -> Iterator[tuple[str, Path | None, int | None]]:
    yield config.context, config.path, config.context_line
    for target in config.targets:
        path = target.spec_path or config.path
        markers: list[FunctionMarker | CallMarker | RangeMarker] = [
            *target.functions,
            *target.calls,
            *target.ranges,
        ]
        for marker in markers:
            if marker.context:
                yield marker.context, path, marker.context_line or marker.line


__all__ = ["check_contexts"]

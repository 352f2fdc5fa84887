"""Check the range contexts a spec names, reporting a bad one at its spec file and line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ncompass.errors import ContextError, SpecError
from ncompass.spec.models import CallMarker, FunctionMarker, RangeMarker, RewriteConfig


def check_contexts(config: RewriteConfig, *, import_classes: bool) -> None:
    """Resolve every context of ``config`` (the default and each marker's own).

    Args:
        config: The spec.
        import_classes: Also import custom context classes (``pkg.mod:Timer``). Off when
            rewrites are enabled: such a class may live in code that is not importable yet
            (the script run as ``__main__``); it is then checked when the marker is bound.

    Raises:
        SpecError: a context is unknown or unusable; the message names the spec file and the
            line of the ``context:`` that names it and what to do.
    """
    from ncompass.runtime.sites import resolve_context

    for context, path, line in _contexts(config):
        if not import_classes and (":" in context or "." in context):
            continue
        try:
            resolve_context(context)
        except ContextError as error:
            raise SpecError(str(error), path, line) from None


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

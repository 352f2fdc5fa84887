"""Turn rewrites on and off: the public ``enable_rewrites`` / ``disable_rewrites`` pair.

One :class:`RewritingFinder` sits first in ``sys.meta_path``. It decides from the module name in
O(1) (a dict lookup, plus a set lookup when the spec has file targets) and returns ``None`` for
everything else, so non-target imports cost nothing measurable. For a target it asks the other
finders for the normal spec and swaps in a :class:`RewritingLoader`; it never imports anything.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ncompass import environment_variables
from ncompass.errors import NcompassWarning, SpecError
from ncompass.importer.contexts import check_contexts
from ncompass.importer.inplace import apply_in_place, restore_in_place
from ncompass.importer.loader import RewritingLoader
from ncompass.importer.registry import REGISTRY
from ncompass.importer.targets import TargetTable
from ncompass.spec.models import RewriteConfig

CONFIG_ENV = environment_variables.NCOMPASS_CONFIG

_LOCK = threading.RLock()


class NotRewrittenWarning(NcompassWarning):
    """A target module is not Python source (an extension or a zip) and cannot be rewritten."""


class RewritingFinder(importlib.abc.MetaPathFinder):
    """The meta-path finder that hands target modules to :class:`RewritingLoader`."""

    def __init__(self, table: TargetTable) -> None:
        self.table = table

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        table = self.table
        entry = table.by_module.get(fullname)
        if entry is None and not table.may_be_file_target(fullname):
            return None
        spec = self._normal_spec(fullname, path, target)
        if spec is None or spec.origin is None:
            return None
        if entry is None:
            entry = table.for_file(spec.origin)
            if entry is None:
                return None
        if not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            warnings.warn(
                f"ncompass: target {fullname} is loaded by {type(spec.loader).__name__}, not from "
                "Python source; it is not rewritten",
                NotRewrittenWarning,
                stacklevel=2,
            )
            return spec
        spec.loader = RewritingLoader(fullname, spec.origin, entry, table.config)
        return spec

    def _normal_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        """The spec the other finders would give (editable installs and zip imports included)."""
        for finder in list(sys.meta_path):
            if isinstance(finder, RewritingFinder):
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def invalidate_caches(self) -> None:
        """Nothing cached here; present for the ``MetaPathFinder`` protocol."""


_FINDER: RewritingFinder | None = None


def active_config() -> RewriteConfig | None:
    """The spec rewrites are enabled with, or None when they are off."""
    finder = _FINDER
    return finder.table.config if finder is not None else None


def active_table() -> TargetTable | None:
    """The target table of the active spec, or None when rewrites are off."""
    finder = _FINDER
    return finder.table if finder is not None else None


def enable_rewrites(config: RewriteConfig | dict[str, Any] | str | Path | None = None) -> None:
    """Rewrite the spec's targets from now on, including modules already imported.

    Args:
        config: A :class:`RewriteConfig`, a spec dict (version 0 or 1), or a spec file path.
            ``None`` loads the file named by ``$NCOMPASS_CONFIG`` (or enables an empty spec).

    Calling it again replaces the previous spec: modules it no longer targets get their
    original code back, modules it targets differently get the new markers.

    Raises:
        SpecError: the spec is invalid or a marker in an already-imported module matches nothing.
    """
    resolved = _coerce(config)
    check_contexts(resolved, read_classes=False)  # a misspelt context fails here, at its line
    global _FINDER
    with _LOCK:
        table = TargetTable(resolved)
        if _FINDER is None:
            _FINDER = RewritingFinder(table)
            sys.meta_path.insert(0, _FINDER)
        else:
            _FINDER.table = table
        _sync_imported_modules(table)


def disable_rewrites() -> None:
    """Stop rewriting imports and give every rewritten module its original code back."""
    global _FINDER
    with _LOCK:
        if _FINDER is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(_FINDER)
            _FINDER = None
        for record in REGISTRY.modules():
            REGISTRY.pop(record.name)
            restore_in_place(record, _loaded(record.name, record.path))


# the name of the whole-run range in traces; the session recognises it by this one constant
FULL_TRACE_MARKER = "ncompass.full_trace"
_full_trace_range: WholeRunRange | None = None


class WholeRunRange:
    """The one ``ncompass.full_trace`` range around a whole run, opened at once, closable early.

    Opens nothing unless ``enabled`` is true (the spec is in full-trace mode). A start/end range,
    so it is valid across threads and may close in another function than it opened in.
    """

    def __init__(self, context: str, enabled: bool = True) -> None:
        self._leave: Callable[[Any], object] | None = None
        self._handle: Any = None
        if enabled:
            from ncompass.runtime.sites import bind

            enter, self._leave = bind(context, FULL_TRACE_MARKER, async_safe=True)
            self._handle = enter()

    def close(self) -> None:
        """End the range (once; later calls do nothing)."""
        leave, self._leave = self._leave, None
        if leave is not None:
            leave(self._handle)


def enable_full_trace_mode() -> None:
    """Capture the whole run as one top-level range with everything inside it.

    Rewrites stay enabled with the current spec (or an empty one) marked ``full_trace_mode``.
    ``ncompass run`` and :class:`ProfilingSession` then wrap the entry point in one range named
    ``ncompass.full_trace``; called inside a running program, the range opens now and closes at
    interpreter exit (a start/end range, so it is valid across threads).
    """
    import atexit

    global _full_trace_range
    with _LOCK:
        current = active_config() or RewriteConfig()
        enable_rewrites(current.model_copy(update={"full_trace_mode": True}))
        if (
            _full_trace_range is not None
            or os.environ.get(environment_variables.NCOMPASS_RUNNER) == "1"
        ):
            return  # the runner wraps the entry point itself
        _full_trace_range = WholeRunRange(current.context)
        atexit.register(_full_trace_range.close)


def _coerce(config: RewriteConfig | dict[str, Any] | str | Path | None) -> RewriteConfig:
    if isinstance(config, RewriteConfig):
        return config
    if isinstance(config, dict):
        return RewriteConfig.from_dict(config)
    if isinstance(config, str | Path):
        return RewriteConfig.from_yaml(config)
    if config is None:
        from_env = os.environ.get(CONFIG_ENV)
        return RewriteConfig.from_yaml(from_env) if from_env else RewriteConfig()
    raise SpecError(
        "enable_rewrites() takes a RewriteConfig, a dict or a spec path, "
        f"not {type(config).__name__}"
    )


def _loaded(name: str, path: str) -> ModuleType | None:
    module = sys.modules.get(name)
    if module is None:
        return None
    file = getattr(module, "__file__", None)
    return module if file and os.path.realpath(file) == path else None


def _sync_imported_modules(table: TargetTable) -> None:
    """Bring modules already in ``sys.modules`` in line with ``table``."""
    for record in REGISTRY.modules():
        entry = table.for_module(record.name) or table.for_file(record.path)
        if entry is None:
            REGISTRY.pop(record.name)
            restore_in_place(record, _loaded(record.name, record.path))
    for name, entry in table.by_module.items():
        module = sys.modules.get(name)
        if module is None:
            continue
        current = REGISTRY.get(name)
        if current is None or current.digest != entry.digest:
            apply_in_place(module, entry, table.config)
    if table.by_file:
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if not file:
                continue
            file_entry = table.for_file(file)
            if file_entry is None:
                continue
            current = REGISTRY.get(name)
            if current is None or current.digest != file_entry.digest:
                apply_in_place(module, file_entry, table.config)


__all__ = [
    "FULL_TRACE_MARKER",
    "NotRewrittenWarning",
    "RewritingFinder",
    "WholeRunRange",
    "active_config",
    "active_table",
    "disable_rewrites",
    "enable_full_trace_mode",
    "enable_rewrites",
]

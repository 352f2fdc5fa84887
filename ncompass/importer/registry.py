"""What the import hook has changed in this process, so it can be listed and undone."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from types import CodeType, FunctionType
from typing import Any, Literal

import orjson

# typing_extensions' TypedDict: pydantic validates only it on Python < 3.12
from typing_extensions import TypedDict

from ncompass.spec.models import RewriteConfig, TargetSpec


class MarkerRecord(TypedDict):
    """One marker site in the manifest (``MarkerSite.to_dict``), as the run's sidecar, the
    session history and the providers' marker requests hold it.

    Attributes:
        id: Number of the site within its module (names the generated helpers).
        name: The marker name, or its template when ``dynamic``.
        kind: ``function``, ``call`` or ``range``.
        context: The range context (``torch``, ``nvtx``, ``pkg.mod:Class``, ...).
        module: The module's dotted name or file name.
        file: The source file.
        qualname: The function the marker is in (``<module>`` at top level).
        start_line, end_line: The original lines covered.
        dynamic: The name has ``{expr}`` parts evaluated at call time.
        async_safe: Start/end ranges instead of push/pop.
        values: Keyword values for custom contexts.
        spec_line: Where the marker is written in its spec file.
    """

    id: int
    name: str
    # rewrite.plan's MarkerKind, spelt out: a cached import does not load the rewriter
    kind: Literal["function", "call", "range"]
    context: str
    module: str
    file: str | None
    qualname: str
    start_line: int
    end_line: int
    dynamic: bool
    async_safe: bool
    values: dict[str, Any]
    spec_line: int | None


@dataclass(eq=False)
class RewrittenModule:
    """A module running rewritten code.

    Attributes:
        name: The module's name in ``sys.modules``.
        path: Its source file.
        digest: The digest of the spec entries it was rewritten for.
        manifest_json: One entry per marker site (see ``MarkerSite.to_dict``), as JSON; kept
            encoded because a cached import should not pay for decoding it.
        originals: Functions whose ``__code__`` was swapped in place, with their old code.
    """

    name: str
    path: str
    digest: str
    manifest_json: bytes
    originals: list[tuple[FunctionType, CodeType]] = field(default_factory=list)

    @property
    def manifest(self) -> list[MarkerRecord]:
        """The marker sites, decoded."""
        entries: list[MarkerRecord] = orjson.loads(self.manifest_json)
        return entries


class Registry:
    """Thread-safe record of rewritten modules, by module name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modules: dict[str, RewrittenModule] = {}

    def record(self, module: RewrittenModule) -> None:
        """Remember (or replace) the record of a rewritten module."""
        with self._lock:
            self._modules[module.name] = module

    def pop(self, name: str) -> RewrittenModule | None:
        """Forget a module's record and return it."""
        with self._lock:
            return self._modules.pop(name, None)

    def get(self, name: str) -> RewrittenModule | None:
        """The record of module ``name``."""
        with self._lock:
            return self._modules.get(name)

    def modules(self) -> list[RewrittenModule]:
        """Every rewritten module."""
        with self._lock:
            return list(self._modules.values())

    def manifest(self) -> list[MarkerRecord]:
        """Every marker site placed in this process (marker name → module, function, lines)."""
        return [site for module in self.modules() for site in module.manifest]

    def unplaced(self, config: RewriteConfig) -> list[TargetSpec]:
        """The targets of ``config`` no rewritten module came from: the program never imported
        them (often a misspelt module name or a file path that is not the one run)."""
        modules = self.modules()
        names = {module.name for module in modules}
        paths = {os.path.realpath(module.path) for module in modules}
        return [
            target
            for target in config.targets
            if (target.module is not None and target.module not in names)
            or (target.file is not None and os.path.realpath(target.file) not in paths)
        ]


REGISTRY = Registry()

__all__ = ["REGISTRY", "MarkerRecord", "Registry", "RewrittenModule"]

"""Write throwaway modules and specs to a temporary folder and import them for real."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

from ncompass.importer.hook import disable_rewrites, enable_rewrites
from ncompass.spec.models import RewriteConfig
from tests.support import recording


class ModuleLab:
    """Creates modules in ``root`` (put on ``sys.path``) and imports them under rewrites."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._names: list[str] = []

    def write(self, name: str, source: str) -> Path:
        """Write module ``name`` (dotted names create packages) and return its file."""
        parts = name.split(".")
        folder = self.root
        for package in parts[:-1]:
            folder = folder / package
            folder.mkdir(exist_ok=True)
            init = folder / "__init__.py"
            if not init.exists():
                init.write_text("")
        path = folder / f"{parts[-1]}.py"
        path.write_text(textwrap.dedent(source).lstrip("\n"))
        self._names.append(name)
        importlib.invalidate_caches()
        return path

    def spec(self, spec: dict[str, Any], context: str = recording.CONTEXT) -> RewriteConfig:
        """A version 1 spec dict (``version`` and ``context`` filled in) as a config."""
        return RewriteConfig.from_dict({"version": 1, "context": context, **spec})

    def load(self, name: str, spec: dict[str, Any] | RewriteConfig | None = None) -> ModuleType:
        """Import ``name`` fresh, with rewrites enabled for ``spec`` (when given)."""
        self.forget(name)
        if spec is not None:
            config = spec if isinstance(spec, RewriteConfig) else self.spec(spec)
            enable_rewrites(config)
        recording.reset()
        return importlib.import_module(name)

    def forget(self, name: str) -> None:
        """Remove ``name`` and its submodules from ``sys.modules``."""
        for loaded in list(sys.modules):
            if loaded == name or loaded.startswith(name + "."):
                del sys.modules[loaded]

    def close(self) -> None:
        """Disable rewrites and forget every module written."""
        disable_rewrites()
        for name in self._names:
            self.forget(name.split(".")[0])

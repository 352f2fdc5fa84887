"""Find a target's source file without importing it (importing a target would run its code)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from pathlib import Path

from ncompass.errors import SpecError


def module_source(name: str) -> Path:
    """The ``.py`` file of module ``name``, found the way the import system would find it.

    Parent packages are searched on disk, not imported; a module that only a custom finder
    knows (e.g. some editable installs) falls back to :func:`importlib.util.find_spec`.

    Raises:
        SpecError: no such module, or it is not Python source.
    """
    spec = _path_spec(name)
    if spec is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
    if spec is None or spec.origin is None:
        raise SpecError(
            f"module {name!r} not found on sys.path; check the name, install it, or add the "
            "folder that contains it to the search path (--path FOLDER on the command line, "
            "or PYTHONPATH)"
        )
    if not spec.origin.endswith(".py"):
        raise SpecError(
            f"module {name!r} is not Python source ({spec.origin}); it cannot be rewritten"
        )
    return Path(spec.origin)


def _path_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    search: list[str] | None = None
    spec: importlib.machinery.ModuleSpec | None = None
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:depth]), search)
        if spec is None:
            return None
        if depth < len(parts):
            locations = spec.submodule_search_locations
            if locations is None:
                return None
            search = list(locations)
    return spec


def file_source(path: str | os.PathLike[str]) -> Path:
    """A target file's path, checked.

    Raises:
        SpecError: the file does not exist.
    """
    file = Path(path)
    if not file.is_file():
        raise SpecError(f"target file {file} does not exist")
    return file


__all__ = ["file_source", "module_source"]

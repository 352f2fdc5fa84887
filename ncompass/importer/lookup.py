"""Find a target's source file without importing it (importing a target would run its code)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

from ncompass.errors import SpecError


def module_source(name: str) -> Path:
    """The ``.py`` file of module ``name``, found the way the import system would find it.

    Parent packages are searched on disk, not imported; a module that only a custom finder
    knows (e.g. some editable installs) falls back to :func:`importlib.util.find_spec`.

    Raises:
        SpecError: no such module, or it is not Python source.
    """
    spec = spec_without_import(name)
    if spec is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
    if spec is None or spec.origin is None:
        raise SpecError(
            f"module {name!r} not found on sys.path; check the name, install it, or add the "
            "folder that contains it to PYTHONPATH (or, to check a spec, give it as `ncompass "
            "spec validate --path FOLDER`)"
        )
    if not spec.origin.endswith(".py"):
        raise SpecError(
            f"module {name!r} is not Python source ({spec.origin}); it cannot be rewritten"
        )
    return Path(spec.origin)


def spec_without_import(name: str) -> importlib.machinery.ModuleSpec | None:
    """Where module ``name`` is, found without importing it or any of its parent packages.

    ``importlib.util.find_spec("a.b")`` imports ``a`` (running its ``__init__``); here each
    part is looked up by its own name in the folders of the part before it. A top-level name is
    also asked of the other finders on ``sys.meta_path`` (editable installs register one),
    which only map names to files. None when no finder knows it this way.
    """
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__spec__", None) is not None:
        return loaded.__spec__
    search: list[str] | None = None
    spec: importlib.machinery.ModuleSpec | None = None
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        # Found by its own name inside the folders of its parent: a dotted name would make
        # the finder read the parent from sys.modules, which is not imported.
        if search is None:
            spec = _top_level_spec(parts[0])
        else:
            spec = importlib.machinery.PathFinder.find_spec(parts[depth - 1], search)
        if spec is None:
            return None
        if depth < len(parts):
            if spec.submodule_search_locations is None:
                return None
            search = _package_folders(spec, parts[depth - 1], search)
    return spec


def _top_level_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    spec = importlib.machinery.PathFinder.find_spec(name)
    if spec is not None:
        return spec
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if finder is importlib.machinery.PathFinder or find_spec is None:
            continue
        try:
            found: importlib.machinery.ModuleSpec | None = find_spec(name, None)
        except Exception:  # a third-party finder's failure only means "not found this way"
            continue
        if found is not None:
            return found
    return None


def _package_folders(
    spec: importlib.machinery.ModuleSpec, name: str, search: list[str] | None
) -> list[str]:
    """Where a package's submodules are found, without importing the package.

    A namespace package (a folder without ``__init__.py``) computes its folders from its
    parent module in ``sys.modules`` when they are read, which is wrong or fails for a parent
    not imported; its folders are the ``name`` folders on the search path instead.
    """
    if spec.origin is not None:
        return list(spec.submodule_search_locations or [])
    entries = search if search is not None else [entry or "." for entry in sys.path]
    return [folder for entry in entries if os.path.isdir(folder := os.path.join(entry, name))]


def file_source(path: str | os.PathLike[str]) -> Path:
    """A target file's path, checked.

    Raises:
        SpecError: the file does not exist.
    """
    file = Path(path)
    if not file.is_file():
        raise SpecError(f"target file {file} does not exist")
    return file


__all__ = ["file_source", "module_source", "spec_without_import"]

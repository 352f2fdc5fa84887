"""How the session prints a file: short enough to read, exact enough to open.

A file of an installed package prints from its package folder
(``transformers/models/gpt2/modeling_gpt2.py``, not the 300 characters of a virtual
environment's ``site-packages`` path, even when that environment is inside the working folder);
another file inside the working folder prints relative to it (``model.py``); any other file
prints whole.
"""

from __future__ import annotations

from pathlib import Path, PurePath

_INSTALLED = ("site-packages", "dist-packages")


def shown_path(file: str) -> str:
    """``file`` as the session prints it (see the module docstring)."""
    parts = PurePath(file).parts
    for position in range(len(parts) - 1, -1, -1):  # an installed package: from its folder,
        if parts[position] in _INSTALLED and position + 1 < len(parts):  # even in a local venv
            return str(PurePath(*parts[position + 1 :]))
    try:
        return str(Path(file).resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return file


__all__ = ["shown_path"]

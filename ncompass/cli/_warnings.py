"""How ncompass's own warnings read on the command line: one line, not a warnings-module line.

A warning issued inside ncompass (a skipped target, a moved range) is about the user's spec or
run, so the file and line of ncompass's own code that issued it say nothing to them: it is
printed as ``ncompass: MESSAGE``. Warnings that point at the user's code keep their location,
and everyone else's warnings are shown as Python shows them.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import TextIO

from ncompass.errors import NcompassWarning

_PACKAGE = Path(__file__).resolve().parents[1]


def show_own_warnings_as_lines() -> None:
    """Route :class:`NcompassWarning`s issued from ncompass's code to one plain line each."""
    original = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not (issubclass(category, NcompassWarning) and _is_ours(filename)):
            original(message, category, filename, lineno, file, line)
            return
        text = str(message)
        stream = file if file is not None else sys.stderr
        try:
            stream.write(text if text.startswith("ncompass: ") else f"ncompass: {text}")
            stream.write("\n")
        except OSError:  # as warnings.showwarning: a closed stderr loses the warning
            pass

    warnings.showwarning = show


def _is_ours(filename: str) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(_PACKAGE)
    except (OSError, ValueError):
        return False


__all__ = ["show_own_warnings_as_lines"]

"""No command writes over one of its inputs: the one check every writer calls first.

Two paths name the same file when they resolve to the same place (symlinks, ``./a`` and ``a``,
``..`` segments) or, when both exist, are the same inode (hard links, bind mounts).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ncompass.errors import NcompassError


class OutputIsInputError(NcompassError):
    """A command was asked to write its output over one of its own inputs."""


def same_file(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Whether two paths name the same file (see the module docstring)."""
    if Path(first).resolve() == Path(second).resolve():
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet): different files
        return False


def refuse_overwriting_inputs(
    output: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str]],
) -> None:
    """Raise before ``output`` is written if it is one of ``inputs``.

    Args:
        output: The file about to be written.
        inputs: The files the command reads.

    Raises:
        OutputIsInputError: naming the file; the input is left as it was.
    """
    for source in inputs:
        if same_file(output, source):
            shown = f"{output}" if str(output) == str(source) else f"{output} (it is {source})"
            raise OutputIsInputError(
                f"{shown} is an input of this command and would be overwritten; "
                "choose another output file (the input was left unchanged)"
            )


__all__ = ["OutputIsInputError", "refuse_overwriting_inputs", "same_file"]
